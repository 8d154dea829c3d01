// Reads a capacity file with Cruise Control's own BrokerCapacityConfigFileResolver and prints
// each broker's resolved NW_IN, NW_OUT (KiB/s), DISK (MB) and CPU. Used by
// tools/capacity.d/cruise-control-check. usage: ReadBack FILE BROKER_ID...
// (-Destimate=true: allow capacity estimation, so that broker -1 stands for unlisted ones)
import com.linkedin.kafka.cruisecontrol.config.BrokerCapacityConfigFileResolver;
import com.linkedin.kafka.cruisecontrol.config.BrokerCapacityInfo;
import com.linkedin.kafka.cruisecontrol.common.Resource;
import java.util.Map;
public class ReadBack {
  public static void main(String[] a) throws Exception {
    BrokerCapacityConfigFileResolver r = new BrokerCapacityConfigFileResolver();
    r.configure(Map.of(BrokerCapacityConfigFileResolver.CAPACITY_CONFIG_FILE, a[0]));
    for (int i = 1; i < a.length; i++) {
      BrokerCapacityInfo c = r.capacityForBroker("rack", "host", Integer.parseInt(a[i]), 1000, Boolean.getBoolean("estimate"));
      System.out.println("broker " + a[i] + " NW_IN " + c.capacity().get(Resource.NW_IN) + " NW_OUT " + c.capacity().get(Resource.NW_OUT)
        + " DISK " + c.capacity().get(Resource.DISK) + " CPU " + c.capacity().get(Resource.CPU) + " cores " + c.numCpuCores());
    }
  }
}
