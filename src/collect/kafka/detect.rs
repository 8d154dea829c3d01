//! Finding the broker of this host (`--kafka auto`): a `kafka.Kafka`
//! process in the observer's network namespace, its listeners read from
//! its configuration (the properties file it was started with and its
//! `--override`s); else whatever listens on port 9092 here.

use std::collections::HashMap;
use std::fs;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use super::lookup::LocalHints;

/// The broker found, how, and what its configuration tells.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub bootstrap: String,
    pub how: String,
    pub hints: LocalHints,
}

/// The broker of this namespace, Err with why none can be asked (one with
/// no PLAINTEXT listener), Ok(None) when there is none.
pub(crate) fn find_local() -> Result<Option<Found>, String> {
    let own = super::super::netns::own().ok();
    let mut entries: Vec<u32> = match fs::read_dir("/proc") {
        Ok(d) => d
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => return Ok(None),
    };
    entries.sort_unstable();
    for pid in entries {
        let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let Some(main) = args.iter().position(|a| a == "kafka.Kafka") else {
            continue;
        };
        let ns = super::super::netns::inode_of(Path::new(&format!("/proc/{pid}/ns/net")))
            .ok()
            .map(|i| i as u32);
        if own.is_some() && ns != own {
            continue;
        }
        return broker_of(pid, &args[main + 1..]).map(Some);
    }
    if listening_ports(None).contains(&9092) {
        return Ok(Some(Found {
            bootstrap: "127.0.0.1:9092".into(),
            how: "a process listens on port 9092 in this namespace (no kafka.Kafka process \
                  found)"
                .into(),
            hints: LocalHints::default(),
        }));
    }
    Ok(None)
}

/// The broker `pid`, started with `args` after its main class.
fn broker_of(pid: u32, args: &[String]) -> Result<Found, String> {
    let mut props = HashMap::new();
    let mut source = String::from("no configuration read");
    if let Some(path) = args.first().filter(|a| !a.starts_with("--")) {
        // A relative path is the process's working directory's.
        let full = Path::new(&format!("/proc/{pid}/cwd")).join(path);
        match fs::read_to_string(&full) {
            Ok(text) => {
                props = parse_properties(&text);
                source = format!("its configuration {path}");
            }
            Err(e) => source = format!("its configuration {path} unreadable ({e})"),
        }
    }
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--override" {
            if let Some((k, v)) = it.next().and_then(|kv| kv.split_once('=')) {
                props.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    let mut hints = LocalHints {
        pid: Some(pid),
        node_id: props
            .get("node.id")
            .or_else(|| props.get("broker.id"))
            .and_then(|v| v.parse().ok()),
        ..Default::default()
    };
    let controller_names: Vec<&str> = props
        .get("controller.listener.names")
        .map(|v| v.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let protocols: HashMap<&str, &str> = props
        .get("listener.security.protocol.map")
        .map(|v| {
            v.split(',')
                .filter_map(|kv| kv.split_once(':'))
                .map(|(k, v)| (k.trim(), v.trim()))
                .collect()
        })
        .unwrap_or_default();
    let listeners = props
        .get("listeners")
        .map(|v| parse_listeners(v))
        .unwrap_or_default();
    let mut plaintext = None;
    let mut secured = Vec::new();
    for (name, host, port) in &listeners {
        if controller_names.contains(&name.as_str()) {
            hints.controller_ports.push(*port);
            continue;
        }
        hints.listener_ports.push(*port);
        let proto = protocols
            .get(name.as_str())
            .copied()
            .unwrap_or(name.as_str());
        if proto == "PLAINTEXT" {
            plaintext.get_or_insert((name.clone(), host.clone(), *port));
        } else {
            secured.push(format!("{name}://{host}:{port} ({proto})"));
        }
    }
    for key in [
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
    ] {
        for item in props.get(key).map(|v| v.split(',')).into_iter().flatten() {
            let hp = item.rsplit('@').next().unwrap_or(item).trim();
            if let Some(a) = hp.to_socket_addrs().ok().and_then(|mut a| a.next()) {
                hints.controllers.push(a);
            }
        }
    }
    hints.controllers.sort();
    hints.controllers.dedup();
    let (bootstrap, how) = match plaintext {
        Some((name, host, port)) => {
            let host = connect_host(&host);
            (
                format!("{host}:{port}"),
                format!("the broker java/{pid} (kafka.Kafka), its PLAINTEXT listener {name} from {source}"),
            )
        }
        None if !listeners.is_empty() => {
            return Err(format!(
                "the broker java/{pid} has no PLAINTEXT listener ({}): throttlescope speaks \
                 PLAINTEXT only; flows keep their addresses (give --kafka HOST:PORT of a \
                 PLAINTEXT listener, or --kafka off)",
                secured.join(", ")
            ))
        }
        None => {
            let ports = listening_ports(Some(pid));
            let port = if ports.contains(&9092) {
                9092
            } else {
                match ports.iter().find(|p| !hints.controller_ports.contains(p)) {
                    Some(&p) => p,
                    None => {
                        return Err(format!(
                            "the broker java/{pid} listens on no port this namespace shows \
                             ({source}): give --kafka HOST:PORT, or --kafka off"
                        ))
                    }
                }
            };
            hints.listener_ports.push(port);
            (
                format!("127.0.0.1:{port}"),
                format!("the broker java/{pid} (kafka.Kafka) listening on port {port} ({source})"),
            )
        }
    };
    hints.listener_ports.sort_unstable();
    hints.listener_ports.dedup();
    Ok(Found {
        bootstrap,
        how,
        hints,
    })
}

/// A listener's host as something to connect to: any address (empty,
/// 0.0.0.0, ::) is reached at loopback.
fn connect_host(host: &str) -> String {
    match host {
        "" | "0.0.0.0" => "127.0.0.1".into(),
        "::" | "[::]" => "[::1]".into(),
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        h => h.into(),
    }
}

/// `NAME://host:port,...` to (name, host, port).
pub(crate) fn parse_listeners(v: &str) -> Vec<(String, String, u16)> {
    v.split(',')
        .filter_map(|l| {
            let (name, rest) = l.trim().split_once("://")?;
            let (host, port) = rest.rsplit_once(':')?;
            Some((
                name.trim().to_string(),
                host.to_string(),
                port.parse().ok()?,
            ))
        })
        .collect()
}

/// A Java properties file's `key=value` (or `key: value`) lines.
pub(crate) fn parse_properties(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let i = l.find(['=', ':'])?;
            Some((l[..i].trim().to_string(), l[i + 1..].trim().to_string()))
        })
        .collect()
}

/// Ports in LISTEN in this namespace (/proc/net/tcp and tcp6), of `pid`'s
/// sockets only when given.
fn listening_ports(pid: Option<u32>) -> Vec<u16> {
    let inodes: Option<Vec<u64>> = pid.map(|p| {
        fs::read_dir(format!("/proc/{p}/fd"))
            .map(|d| {
                d.filter_map(|e| {
                    let l = fs::read_link(e.ok()?.path()).ok()?;
                    let s = l.to_str()?;
                    s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
                })
                .collect()
            })
            .unwrap_or_default()
    });
    let mut out = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 || cols[3] != "0A" {
                continue;
            }
            let Some(port) = cols[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
            else {
                continue;
            };
            let inode: u64 = cols[9].parse().unwrap_or(0);
            if inodes.as_ref().is_none_or(|i| i.contains(&inode)) {
                out.push(port);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Parses `--kafka`'s HOST:PORT (checked at start: a typo is an error,
/// not a lookup failing every period).
pub(crate) fn check_target(s: &str) -> Result<(), String> {
    let (_, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("--kafka {s}: not HOST:PORT (or auto, or off)"))?;
    port.parse::<u16>()
        .map_err(|_| format!("--kafka {s}: {port} is no port"))?;
    let _: Option<SocketAddr> = None;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_and_properties_as_kafka_writes_them() {
        let p = parse_properties(
            "# c\nnode.id=2\nlisteners=CLIENT://10.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n\
             controller.listener.names = CONTROLLER\nx: y\n",
        );
        assert_eq!(p["node.id"], "2");
        assert_eq!(p["controller.listener.names"], "CONTROLLER");
        assert_eq!(p["x"], "y");
        assert_eq!(
            parse_listeners(&p["listeners"]),
            vec![
                ("CLIENT".into(), "10.0.0.1".into(), 9092),
                ("CONTROLLER".into(), "127.0.0.1".into(), 9093)
            ]
        );
        assert_eq!(parse_listeners("PLAINTEXT://:9092")[0].1, "");
        assert_eq!(connect_host(""), "127.0.0.1");
        assert!(check_target("broker:9092").is_ok());
        assert!(check_target("broker").is_err());
        assert!(check_target("broker:x").is_err());
    }
}
