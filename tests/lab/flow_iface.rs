//! Which interface a flow uses, against `ip route get`, with the real BPF
//! programs and real TCP traffic through a lab of namespaces. Run as root.
//!
//! The broker namespace gets a second interface (`d1`, a veth with its own
//! subnet and no flows) and a local flow over 127.0.0.1 besides its flows to
//! the client through `b0` on a lossy path. Checked:
//! - every flow of the broker namespace names an interface, and it is the
//!   `dev` of `ip route get PEER from LOCAL` run in that namespace (b0 for
//!   the lab flows, lo for the local ones), while open and in its close
//!   record;
//! - the analysis gives `d1` none of b0's retransmits (retransmit rate
//!   unknown: it has no flows) and b0 none of the local flows' segments;
//! - with `--all-netns`, a pod's flows take the interface the broker routes
//!   them out of (a flow to a service's address: its backend's, after the
//!   broker's DNAT), and a namespace with no veth into the broker's none.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::lab_support::traffic::Bulk;
use crate::lab_support::Lab;
use throttlescope::analysis::{analyze, InterfaceVerdict, IntervalAnalysis, Thresholds};
use throttlescope::model::snapshot::{FlowSample, Snapshot};

/// The `dev` of `ip route get PEER from LOCAL` in namespace `ns`: the
/// route the kernel picks for the flow (`local ... dev lo` for a local peer).
fn route_dev(lab: &Lab, ns: &str, f: &FlowSample) -> String {
    let peer = f.peer.ip().to_string();
    let local = f.local.ip().to_string();
    dev_in(&lab.exec(ns, "ip", &["route", "get", &peer, "from", &local]))
}

/// The word after `dev` in `ip route get`'s answer `out`.
fn dev_in(out: &str) -> String {
    let mut words = out.split_whitespace();
    words
        .by_ref()
        .find(|w| *w == "dev")
        .and_then(|_| words.next())
        .unwrap_or_else(|| panic!("no dev in `ip route get`'s {out}"))
        .to_string()
}

/// Flows of the test's own traffic: the lab port or the loopback port.
fn ours(f: &FlowSample, ports: &[u16]) -> bool {
    ports.contains(&f.local.port()) || ports.contains(&f.peer.port())
}

/// `watch --json --interval 1s ARGS` in namespace `ns` as users run it
/// there (`ip netns exec`, which also gives it that namespace's /sys),
/// `traffic` run once its first interval is out (probes attached); its
/// snapshots. The output is read as it comes: with --all-netns a line
/// carries every namespace's flows, and a full pipe would stall it.
fn watching(ns: &str, args: &[&str], traffic: impl FnOnce()) -> Vec<Snapshot> {
    let mut watch = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(crate::support::binary())
        .args(["watch", "--json", "--interval", "1s"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn watch");
    let (line_tx, line_rx) = mpsc::channel::<String>();
    let stdout = watch.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = vec![line_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("watch printed its first interval (probes attached)")];
    traffic();
    let status = watch.wait().expect("watch ran");
    reader.join().unwrap();
    lines.extend(line_rx.try_iter());
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(&mut watch.stderr.take().unwrap(), &mut stderr);
    assert!(status.success(), "watch failed: {status}: {stderr}");
    lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON snapshot"))
        .collect()
}

/// Interface `name`'s verdict in `a`.
fn judged<'a>(a: &'a IntervalAnalysis, name: &str) -> &'a InterfaceVerdict {
    a.interfaces
        .iter()
        .find(|v| v.iface == name)
        .unwrap_or_else(|| {
            let all: Vec<&str> = a.interfaces.iter().map(|v| v.iface.as_str()).collect();
            panic!("{name} judged: {all:?}")
        })
}

#[test]
fn flow_interface_is_the_route_dev_and_signals_stay_on_it() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("ifc");
    lab.tool(&["shape", "hv_drop"]);
    let broker = lab.broker();
    // A second interface with a subnet of its own (a veth pair inside the
    // broker namespace): nothing is routed over it.
    for args in [
        &["link", "add", "d1", "type", "veth", "peer", "name", "d1p"][..],
        &["addr", "add", "10.77.9.1/24", "dev", "d1"],
        &["link", "set", "d1", "up"],
        &["link", "set", "d1p", "up"],
    ] {
        lab.exec(&broker, "ip", args);
    }
    const LAB_PORT: u16 = 7201;
    const LOCAL_PORT: u16 = 7202;
    let ports = [LAB_PORT, LOCAL_PORT];
    let to_client: SocketAddr = format!("{}:{LAB_PORT}", lab.broker_ip).parse().unwrap();
    let local: SocketAddr = format!("127.0.0.1:{LOCAL_PORT}").parse().unwrap();

    let client = lab.client();
    let snaps = watching(&broker, &["--duration", "12s"], || {
        let lab_flows = Bulk::start(&broker, &client, to_client, 3, Duration::from_secs(4), 0);
        // A broker talking to a local agent: 2 connections at 20 MB/s each.
        let local_flows = Bulk::start(
            &broker,
            &broker,
            local,
            2,
            Duration::from_secs(4),
            20_000_000,
        );
        lab_flows.wait_sent();
        local_flows.wait_sent();
        std::thread::sleep(Duration::from_secs(1));
        // Their close records come in the intervals that follow.
        lab_flows.close();
        local_flows.close();
    });

    // Every flow of the test, while open and as closed, against ip route.
    let mut route_of: HashMap<(SocketAddr, SocketAddr), String> = HashMap::new();
    let (mut samples, mut resolved, mut closed) = (0, 0, 0);
    let mut devs: HashMap<String, usize> = HashMap::new();
    for f in snaps
        .iter()
        .flat_map(|s| &s.flows)
        .filter(|f| ours(f, &ports))
    {
        samples += 1;
        let want = route_of
            .entry((f.local, f.peer))
            .or_insert_with(|| route_dev(&lab, &broker, f));
        assert_eq!(
            f.iface.as_deref(),
            Some(want.as_str()),
            "{} -> {} (closed: {})",
            f.local,
            f.peer,
            f.closed
        );
        resolved += 1;
        closed += usize::from(f.closed);
        *devs.entry(want.clone()).or_default() += 1;
    }
    eprintln!(
        "{samples} flow samples of {} flows, {resolved} resolved, {closed} close records; by ip route dev: {devs:?}",
        route_of.len()
    );
    // 3 lab flows; 2 local connections, seen from both ends.
    assert_eq!(route_of.len(), 7, "{:?}", route_of.keys());
    assert_eq!(route_of.values().filter(|d| *d == "b0").count(), 3);
    assert_eq!(route_of.values().filter(|d| *d == "lo").count(), 4);
    assert_eq!(closed, 7, "every flow's close record carries its interface");

    // The analysis: b0 has the loss, d1 none of it, and neither the local
    // flows' segments.
    let th = Thresholds::default();
    let mut history: Vec<Snapshot> = Vec::new();
    let (mut b0_retrans, mut b0_segs, mut lab_segs, mut local_segs) = (0, 0, 0, 0);
    for s in &snaps {
        let a = analyze(&history, s, &th);
        let (b0, d1) = (judged(&a, "b0"), judged(&a, "d1"));
        assert_eq!(d1.rates.retrans_segs, 0, "seq {}: {:?}", s.seq, d1.rates);
        assert_eq!(d1.rates.segs_out, 0, "seq {}", s.seq);
        assert_eq!(d1.rates.retransmit_pct, None, "seq {}", s.seq);
        assert_eq!(d1.rates.active_flows, 0, "seq {}", s.seq);
        b0_retrans += b0.rates.retrans_segs;
        b0_segs += b0.rates.segs_out;
        for f in &s.flows {
            match f.iface.as_deref() {
                Some("b0") => lab_segs += f.delta.segs_out,
                Some("lo") => local_segs += f.delta.segs_out,
                _ => {}
            }
        }
        history.push(s.clone());
    }
    eprintln!(
        "b0: {b0_retrans} retransmits of {b0_segs} segments (its flows: {lab_segs}); local flows: {local_segs} segments, not counted"
    );
    assert!(
        b0_retrans > 20,
        "the lossy path made retransmits ({b0_retrans})"
    );
    assert!(local_segs > 0, "the local flows sent");
    assert_eq!(b0_segs, lab_segs, "b0 counts its own flows' segments only");
}

/// With `--all-netns` in the broker: a pod's flows take the interface the
/// broker routes them out of (the `dev` of `ip route get PEER from POD_IP
/// iif pv0`: b0), the pod's loopback flows `lo`, and the client's flows
/// (a namespace no veth of the broker's leads into) none: `unrouted`; so
/// are hv's to the client (hv has a veth into the broker's namespace, but
/// these leave hv by another device). The
/// analysis gives the pod's veth none of the pod's retransmits on the lossy
/// path and b0 all of them; the client's count for neither. (When flows of
/// other namespaces counted for every interface, pv0 read b0's loss.)
#[test]
fn a_pods_flows_take_the_interface_the_node_routes_them_out_of() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("ifo");
    lab.tool(&["shape", "hv_drop"]);
    lab.tool(&["pod"]);
    let (broker, client, pod) = (lab.broker(), lab.client(), lab.pod());
    // The client reaches the pod through the broker (hv routes the pod's
    // subnet there), so the pod can be the one that sends.
    let pod_net = format!("{}/32", lab.pod_ip);
    lab.exec(
        &lab.hv(),
        "ip",
        &["route", "replace", &pod_net, "via", &lab.broker_ip],
    );
    let (pod_ns, client_ns) = (lab.netns_inode(&pod), lab.netns_inode(&client));
    let (hv, hv_ns) = (lab.hv(), lab.netns_inode(&lab.hv()));
    // hv has a veth into the broker's namespace (its end of b0), and sends
    // to the client out of another device of its own: never through the
    // broker.
    let hv_to_client = lab.exec(&hv, "ip", &["route", "get", &lab.client_ip]);
    let mut words = hv_to_client.split_whitespace();
    let hv_ip = words
        .by_ref()
        .find(|w| *w == "src")
        .and_then(|_| words.next())
        .unwrap_or_else(|| panic!("no src in {hv_to_client}"))
        .to_string();
    const PORT: u16 = 7203;
    const LOOP_PORT: u16 = 7204;
    const HV_PORT: u16 = 7205;
    let from_hv: SocketAddr = format!("{hv_ip}:{HV_PORT}").parse().unwrap();
    let to_pod: SocketAddr = format!("{}:{PORT}", lab.pod_ip).parse().unwrap();
    let in_pod: SocketAddr = format!("127.0.0.1:{LOOP_PORT}").parse().unwrap();
    let args = [
        "--all-netns",
        "--duration",
        "7s",
        "--iface",
        &lab.broker_if,
        "--iface",
        &lab.pod_broker_if,
    ];
    let snaps = watching(&broker, &args, || {
        let bulk = Bulk::start(&pod, &client, to_pod, 2, Duration::from_secs(3), 0);
        let local = Bulk::start(&pod, &pod, in_pod, 1, Duration::from_secs(3), 5_000_000);
        let router = Bulk::start(&hv, &client, from_hv, 1, Duration::from_secs(3), 2_000_000);
        bulk.wait_sent();
        local.wait_sent();
        router.wait_sent();
        std::thread::sleep(Duration::from_secs(1));
        bulk.close();
        local.close();
        router.close();
    });
    let route = lab.exec(
        &broker,
        "ip",
        &[
            "route",
            "get",
            &lab.client_ip,
            "from",
            &lab.pod_ip,
            "iif",
            &lab.pod_broker_if,
        ],
    );
    let dev = dev_in(&route);
    assert_eq!(
        dev, lab.broker_if,
        "the pod's traffic leaves by b0: {route}"
    );

    let ports = [PORT, LOOP_PORT, HV_PORT];
    let ours = |f: &&FlowSample| ports.contains(&f.local.port()) || ports.contains(&f.peer.port());
    let (mut pod_flows, mut loop_flows, mut client_flows, mut hv_flows) = (0, 0, 0, 0);
    for f in snaps.iter().flat_map(|s| &s.flows).filter(ours) {
        let what = format!(
            "{} -> {} netns {}: {:?} unrouted {}",
            f.local, f.peer, f.netns, f.iface, f.unrouted
        );
        if f.netns == pod_ns && f.peer.ip().is_loopback() {
            loop_flows += 1;
            assert_eq!(
                (f.iface.as_deref(), f.unrouted),
                (Some("lo"), false),
                "{what}"
            );
        } else if f.netns == pod_ns {
            pod_flows += 1;
            assert_eq!(
                (f.iface.as_deref(), f.unrouted),
                (Some(dev.as_str()), false),
                "{what}"
            );
        } else if f.netns == client_ns || f.netns == hv_ns {
            if f.netns == hv_ns {
                hv_flows += 1;
            } else {
                client_flows += 1;
            }
            assert_eq!((f.iface.as_deref(), f.unrouted), (None, true), "{what}");
        }
    }
    eprintln!(
        "samples: pod {pod_flows}, pod loopback {loop_flows}, client {client_flows}, hv {hv_flows}"
    );
    assert!(pod_flows >= 2 && loop_flows >= 2 && client_flows >= 3 && hv_flows >= 1);

    let th = Thresholds::default();
    let mut history: Vec<Snapshot> = Vec::new();
    let (mut b0_retrans, mut pod_retrans, mut lo_retrans) = (0, 0, 0);
    for s in &snaps {
        let a = analyze(&history, s, &th);
        let (b0, pv0) = (judged(&a, &lab.broker_if), judged(&a, &lab.pod_broker_if));
        assert_eq!(
            (
                pv0.rates.segs_out,
                pv0.rates.retrans_segs,
                pv0.rates.active_flows
            ),
            (0, 0, 0),
            "seq {}: the pod's veth carries none of the pod's flows: {:?}",
            s.seq,
            pv0.rates
        );
        let routed: u64 = s
            .flows
            .iter()
            .filter(|f| f.iface.as_deref() == Some(lab.broker_if.as_str()))
            .map(|f| f.delta.retrans_segs)
            .sum();
        assert_eq!(
            b0.rates.retrans_segs, routed,
            "seq {}: b0 counts its flows' retransmits only",
            s.seq
        );
        b0_retrans += b0.rates.retrans_segs;
        // The pod's flows to the client; its loopback flow's retransmits
        // are lo's (a tail loss probe on lo, an ACK late on a loaded
        // machine, once read 18,832 here against b0's 18,831).
        pod_retrans += s
            .flows
            .iter()
            .filter(|f| f.netns == pod_ns && !f.peer.ip().is_loopback())
            .map(|f| f.delta.retrans_segs)
            .sum::<u64>();
        lo_retrans += s
            .flows
            .iter()
            .filter(|f| f.netns == pod_ns && f.peer.ip().is_loopback())
            .map(|f| f.delta.retrans_segs)
            .sum::<u64>();
        history.push(s.clone());
    }
    eprintln!(
        "b0: {b0_retrans} retransmits, the pod's flows to the client: {pod_retrans}, its loopback flow: {lo_retrans}"
    );
    assert!(
        pod_retrans > 20,
        "the lossy path made the pod retransmit ({pod_retrans})"
    );
    assert_eq!(b0_retrans, pod_retrans);
}

/// One connection from namespace `from` to `connect`, accepted on
/// `listen` in namespace `listener` (they differ where a NAT translates):
/// 3 s of writes, then closed.
fn one_connection(listener: &str, listen: SocketAddr, from: &str, connect: SocketAddr) {
    let (listener, from) = (
        std::path::PathBuf::from("/run/netns").join(listener),
        std::path::PathBuf::from("/run/netns").join(from),
    );
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        crate::lab_support::enter_netns(&listener);
        let l = std::net::TcpListener::bind(listen).expect("bind the listener");
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().expect("accept");
        let mut buf = vec![0u8; 64 * 1024];
        while std::io::Read::read(&mut s, &mut buf).is_ok_and(|n| n > 0) {}
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let client = std::thread::spawn(move || {
        crate::lab_support::enter_netns(&from);
        let mut s = std::net::TcpStream::connect_timeout(&connect, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to {connect}: {e}"));
        let buf = vec![0x5au8; 16 * 1024];
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_secs(3) {
            std::io::Write::write_all(&mut s, &buf).expect("send");
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    client.join().unwrap();
    server.join().unwrap();
}

/// `watch --all-netns` in the broker (b0 and the pod's veth) while the pod
/// makes one connection to `connect`, accepted on `listen` in namespace
/// `listener`.
fn watching_a_pods_connection(
    lab: &Lab,
    listener: &str,
    listen: SocketAddr,
    connect: SocketAddr,
) -> Vec<Snapshot> {
    let args = [
        "--all-netns",
        "--duration",
        "5s",
        "--iface",
        &lab.broker_if,
        "--iface",
        &lab.pod_broker_if,
    ];
    watching(&lab.broker(), &args, || {
        one_connection(listener, listen, &lab.pod(), connect)
    })
}

/// `nft -f -` in namespace `ns` with `rules`.
fn nft(ns: &str, rules: &str) {
    let mut nft = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("nft");
    std::io::Write::write_all(&mut nft.stdin.take().unwrap(), rules.as_bytes()).unwrap();
    assert!(nft.wait().unwrap().success(), "nft: {rules}");
}

/// A pod's flow that its own namespace's conntrack redirects to itself (a
/// service mesh's sidecar: `redirect` in the pod's output hook, to a proxy
/// on 15001) never leaves the pod: both its ends read `lo`, though the
/// service address it was sent to routes out of b0. Without the pod's own
/// conntrack asked, the application's side read b0.
#[test]
fn a_pods_flow_its_sidecar_redirects_stays_on_loopback() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("msh");
    lab.tool(&["pod"]);
    let pod = lab.pod();
    const SERVICE_IP: &str = "10.96.0.20";
    const PORT: u16 = 7207;
    const PROXY_PORT: u16 = 15001;
    nft(
        &pod,
        &format!(
            "table ip lab_mesh {{\n chain out {{\n type nat hook output priority -100; \
             policy accept;\n ip daddr {SERVICE_IP} tcp dport {PORT} redirect to :{PROXY_PORT}\n \
             }}\n}}\n"
        ),
    );
    let proxy: SocketAddr = format!("0.0.0.0:{PROXY_PORT}").parse().unwrap();
    let service: SocketAddr = format!("{SERVICE_IP}:{PORT}").parse().unwrap();
    let pod_ns = lab.netns_inode(&pod);
    let snaps = watching_a_pods_connection(&lab, &pod, proxy, service);
    let (mut app, mut sidecar) = (0, 0);
    for s in &snaps {
        for f in s.flows.iter().filter(|f| f.netns == pod_ns) {
            let is_app = f.peer == service;
            let is_sidecar = f.local.port() == PROXY_PORT;
            if !(is_app || is_sidecar) {
                continue;
            }
            app += is_app as u32;
            sidecar += is_sidecar as u32;
            assert_eq!(
                (f.iface.as_deref(), f.unrouted),
                (Some("lo"), false),
                "seq {}: {} -> {} stays in the pod",
                s.seq,
                f.local,
                f.peer
            );
        }
    }
    eprintln!("the application's side seen in {app} intervals, the sidecar's in {sidecar}");
    assert!(
        app >= 2 && sidecar >= 2,
        "both ends seen ({app}, {sidecar})"
    );
}

/// A pod's flow to a service's address (a ClusterIP: the broker's
/// conntrack translates it, DNAT, to the broker's own address, as
/// kube-proxy does to a backend on the same node) takes the interface its
/// packets take, `lo` here (`ip route get BACKEND from POD_IP iif pv0`),
/// not the service address's route (b0, the default route): b0 is judged
/// by none of it. Without the translation followed, the flow read b0.
#[test]
fn a_pods_flow_to_a_service_address_takes_its_backends_interface() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("svc");
    lab.tool(&["pod"]);
    let (broker, pod) = (lab.broker(), lab.pod());
    const SERVICE_IP: &str = "10.96.0.10";
    const PORT: u16 = 7206;
    let route_from_pod = |dst: &str| {
        dev_in(&lab.exec(
            &broker,
            "ip",
            &[
                "route",
                "get",
                dst,
                "from",
                &lab.pod_ip,
                "iif",
                &lab.pod_broker_if,
            ],
        ))
    };
    assert_eq!(
        route_from_pod(SERVICE_IP),
        lab.broker_if,
        "the service address itself routes out of b0"
    );
    let backend_dev = route_from_pod(&lab.broker_ip);
    assert_eq!(backend_dev, "lo", "the backend is the broker's own");
    let rules = format!(
        "table ip lab_svc {{\n chain pre {{\n type nat hook prerouting priority dstnat; \
         policy accept;\n ip daddr {SERVICE_IP} tcp dport {PORT} dnat to {}:{PORT}\n }}\n}}\n",
        lab.broker_ip
    );
    nft(&broker, &rules);

    let backend: SocketAddr = format!("{}:{PORT}", lab.broker_ip).parse().unwrap();
    let service: SocketAddr = format!("{SERVICE_IP}:{PORT}").parse().unwrap();
    let pod_ns = lab.netns_inode(&pod);
    let snaps = watching_a_pods_connection(&lab, &broker, backend, service);

    let mut samples = 0;
    for s in &snaps {
        for f in s
            .flows
            .iter()
            .filter(|f| f.netns == pod_ns && f.peer == service)
        {
            samples += 1;
            assert_eq!(
                (f.iface.as_deref(), f.unrouted),
                (Some(backend_dev.as_str()), false),
                "seq {}: {} -> {}: the pod's flow to the service takes the backend's route",
                s.seq,
                f.local,
                f.peer
            );
        }
        let on_b0 = s
            .flows
            .iter()
            .filter(|f| f.peer.port() == PORT || f.local.port() == PORT)
            .filter(|f| f.iface.as_deref() == Some(lab.broker_if.as_str()))
            .count();
        assert_eq!(on_b0, 0, "seq {}: no flow of the service on b0", s.seq);
    }
    eprintln!("the pod's flow to {service} seen in {samples} intervals");
    assert!(samples >= 2, "the pod's flow was seen ({samples})");
}

/// `--iface b0 --iface d1`, and d1 is deleted while watching: b0 keeps its
/// rows and verdicts in every interval, d1 is reported missing (health and
/// the plain view), nothing else changes.
#[test]
fn a_deleted_interface_is_reported_missing_and_the_others_go_on() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("ifdel");
    let broker = lab.broker();
    for args in [
        &["link", "add", "d1", "type", "veth", "peer", "name", "d1p"][..],
        &["link", "set", "d1", "up"],
        &["link", "set", "d1p", "up"],
    ] {
        lab.exec(&broker, "ip", args);
    }
    let addr: SocketAddr = format!("{}:7211", lab.broker_ip).parse().unwrap();
    let bulk = Bulk::start(&broker, &lab.client(), addr, 1, Duration::from_secs(9), 0);
    let mut watch = Command::new("ip")
        .args(["netns", "exec", &broker])
        .arg(crate::support::binary())
        .args(["watch", "--json", "--interval", "1s", "--duration", "8s"])
        .args(["--iface", "b0", "--iface", "d1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn watch");
    let stdout = watch.stdout.take().unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        lines.push(line);
        if lines.len() == 3 {
            lab.exec(&broker, "ip", &["link", "del", "d1"]);
        }
    }
    let status = watch.wait().unwrap();
    bulk.close();
    assert!(status.success(), "watch exited {status}");
    let parsed: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(parsed.len() >= 6, "{} intervals", parsed.len());
    // A line is the snapshot's fields with `analysis` beside them.
    let names = |v: &serde_json::Value, part: Option<&str>, key: &str| -> Vec<String> {
        part.map_or(v, |p| &v[p])["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i[key].as_str().unwrap().to_string())
            .collect()
    };
    let mut missing_seen = 0;
    for (i, v) in parsed.iter().enumerate() {
        let snap_ifaces = names(v, None, "name");
        let judged = names(v, Some("analysis"), "iface");
        let missing: Vec<String> =
            serde_json::from_value(v["health"]["missing_interfaces"].clone()).unwrap_or_default();
        eprintln!("interval {i}: {snap_ifaces:?} judged {judged:?} missing {missing:?}");
        assert!(snap_ifaces.contains(&"b0".to_string()), "interval {i}");
        assert!(judged.contains(&"b0".to_string()), "interval {i}");
        if i < 2 {
            assert_eq!(snap_ifaces, ["b0", "d1"], "interval {i}");
            assert!(missing.is_empty());
        }
        if missing == ["d1"] {
            missing_seen += 1;
            // The interval d1 was deleted in has its last sample, up to
            // its removal, marked removed; after it, d1 is gone.
            let removed: Vec<bool> = v["interfaces"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["removed"].as_bool().unwrap_or(false))
                .collect();
            if missing_seen == 1 && snap_ifaces.len() == 2 {
                assert_eq!(snap_ifaces, ["b0", "d1"], "interval {i}");
                assert_eq!(removed, [false, true], "interval {i}");
            } else {
                assert_eq!(snap_ifaces, ["b0"], "interval {i}");
            }
        }
    }
    assert!(
        missing_seen >= 3,
        "d1 reported missing after it was deleted"
    );
}
