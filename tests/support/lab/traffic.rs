//! Real TCP traffic between two namespaces of a lab, from threads that
//! entered them: a sender that accepts N connections and writes as fast as
//! it may for a while (as a broker sends to consumers), and receivers that
//! read and discard.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::enter_netns;

/// A bulk transfer over `conns` connections. The sockets stay open after
/// sending stops, until [`Bulk::close`], so tools can look at them idle.
pub struct Bulk {
    close_tx: Vec<mpsc::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
    /// The receivers' ports: with the listening port, they tell the
    /// sender's accepted sockets apart.
    pub peer_ports: Vec<u16>,
    done_rx: mpsc::Receiver<u64>,
    conns: usize,
    /// Set by [`Bulk::stop_writing`]: the writers stop before `send_for`.
    stop: Arc<AtomicBool>,
}

impl Bulk {
    /// Listens on `listen` in `sender_ns`; connects `conns` times from
    /// `receiver_ns`; each accepted socket writes for `send_for`, at most
    /// `rate_bytes_per_s` each (0: unlimited).
    pub fn start(
        sender_ns: &str,
        receiver_ns: &str,
        listen: SocketAddr,
        conns: usize,
        send_for: Duration,
        rate_bytes_per_s: u64,
    ) -> Bulk {
        Self::start_as(
            sender_ns,
            receiver_ns,
            listen,
            conns,
            send_for,
            rate_bytes_per_s,
            None,
        )
    }

    /// As [`Bulk::start`], the sending threads named `sender_name` (their
    /// comm, as prctl(PR_SET_NAME) sets it: at most 15 bytes are kept).
    pub fn start_as(
        sender_ns: &str,
        receiver_ns: &str,
        listen: SocketAddr,
        conns: usize,
        send_for: Duration,
        rate_bytes_per_s: u64,
        sender_name: Option<&str>,
    ) -> Bulk {
        let sender_name = sender_name.map(|n| std::ffi::CString::new(n).expect("no NUL in a name"));
        let sender_path = PathBuf::from("/run/netns").join(sender_ns);
        let receiver_path = PathBuf::from("/run/netns").join(receiver_ns);
        let (ready_tx, ready_rx) = mpsc::channel();
        let (port_tx, port_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let mut close_tx = Vec::new();
        let mut threads = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();

        let (acc_close_tx, acc_close_rx) = mpsc::channel::<()>();
        close_tx.push(acc_close_tx);
        threads.push(std::thread::spawn(move || {
            enter_netns(&sender_path);
            let listener = TcpListener::bind(listen).expect("bind in sender netns");
            ready_tx.send(()).unwrap();
            let mut senders = Vec::new();
            let mut sockets = Vec::new();
            for _ in 0..conns {
                let (s, _) = listener.accept().expect("accept");
                port_tx.send(s.peer_addr().unwrap().port()).unwrap();
                let mut w = s.try_clone().unwrap();
                sockets.push(s);
                let done_tx = done_tx.clone();
                let name = sender_name.clone();
                let stopping = stopping.clone();
                senders.push(std::thread::spawn(move || {
                    if let Some(name) = name {
                        // SAFETY: PR_SET_NAME reads a NUL-terminated string.
                        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
                    }
                    let buf = vec![0x5au8; 64 * 1024];
                    let start = Instant::now();
                    let mut sent = 0u64;
                    while start.elapsed() < send_for && !stopping.load(Ordering::SeqCst) {
                        if rate_bytes_per_s > 0 {
                            let allowed =
                                (start.elapsed().as_secs_f64() * rate_bytes_per_s as f64) as u64;
                            if sent >= allowed {
                                std::thread::sleep(Duration::from_millis(2));
                                continue;
                            }
                        }
                        match w.write(&buf) {
                            Ok(n) => sent += n as u64,
                            Err(_) => break,
                        }
                    }
                    done_tx.send(sent).unwrap();
                }));
            }
            for t in senders {
                t.join().unwrap();
            }
            // Keep the sockets open until asked to close.
            let _ = acc_close_rx.recv();
            drop(sockets);
        }));
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("listener ready");

        for _ in 0..conns {
            let (tx, rx) = mpsc::channel::<()>();
            close_tx.push(tx);
            let receiver_path = receiver_path.clone();
            threads.push(std::thread::spawn(move || {
                enter_netns(&receiver_path);
                let mut s =
                    TcpStream::connect_timeout(&listen, Duration::from_secs(5)).expect("connect");
                s.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let mut buf = vec![0u8; 256 * 1024];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e)
                            if e.kind() == std::io::ErrorKind::WouldBlock
                                || e.kind() == std::io::ErrorKind::TimedOut =>
                        {
                            if rx.try_recv().is_ok() {
                                break;
                            }
                        }
                        Err(_) => break,
                    }
                }
            }));
        }
        let peer_ports = (0..conns)
            .map(|_| {
                port_rx
                    .recv_timeout(Duration::from_secs(10))
                    .expect("accepted")
            })
            .collect();
        Bulk {
            close_tx,
            threads,
            peer_ports,
            done_rx,
            conns,
            stop,
        }
    }

    /// Stops the writers now (a `send_for` given as a bound); the sockets
    /// stay open. [`Bulk::wait_sent`] then returns once each has stopped.
    pub fn stop_writing(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Waits until every sender stopped writing; returns bytes written.
    pub fn wait_sent(&self) -> u64 {
        (0..self.conns)
            .map(|_| {
                self.done_rx
                    .recv_timeout(Duration::from_secs(120))
                    .expect("sender done")
            })
            .sum()
    }

    /// Closes every socket and joins the threads.
    pub fn close(self) {
        for tx in &self.close_tx {
            let _ = tx.send(());
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Renames this test process (its thread group leader's comm, the name
/// `ps` shows and throttlescope reports as a flow's process) while the
/// guard lives; the old name comes back on drop. The name is the whole
/// process's: one test renames it at a time (a second waits for the
/// first's guard), or two tests run side by side would each see the
/// other's name.
pub struct ProcessName {
    path: PathBuf,
    old: Vec<u8>,
    _one_at_a_time: MutexGuard<'static, ()>,
}

static RENAMING: Mutex<()> = Mutex::new(());

impl ProcessName {
    pub fn set(name: &str) -> ProcessName {
        // A test that panicked while holding it poisons it; the name was
        // put back by its guard's drop all the same.
        let one = RENAMING.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        let path = PathBuf::from(format!("/proc/self/task/{pid}/comm"));
        let old = std::fs::read(&path).expect("reading the process name");
        std::fs::write(&path, name.as_bytes()).expect("naming the process");
        ProcessName {
            path,
            old,
            _one_at_a_time: one,
        }
    }
}

impl Drop for ProcessName {
    fn drop(&mut self) {
        let old = self.old.strip_suffix(b"\n").unwrap_or(&self.old);
        let _ = std::fs::write(&self.path, old);
    }
}
