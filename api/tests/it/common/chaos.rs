//! A TCP chaos proxy on 127.0.0.1:0 in front of a dependency (database, Redis, RabbitMQ): it
//! forwards bytes both ways until told to cut, which drops every open connection and refuses
//! new ones (accepted and closed at once), until restored.
#![allow(dead_code)]

use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Chaos {
    pub addr: String,
    down: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl Chaos {
    /// Starts forwarding to `target` (`host:port`).
    pub fn start(target: &str) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?.to_string();
        let (down, open, stop) =
            (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (d, o, s, target) = (down.clone(), open.clone(), stop.clone(), target.to_string());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                if d.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let _ = client.set_nonblocking(false);
                let Ok(server) = TcpStream::connect(&target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                if let (Ok(c2), Ok(s2), Ok(mut list)) = (client.try_clone(), server.try_clone(), o.lock()) {
                    list.push(c2);
                    list.push(s2);
                }
                for (mut from, mut to) in
                    [(client.try_clone(), server.try_clone()), (server.try_clone(), client.try_clone())]
                        .into_iter()
                        .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Ok(Self { addr, down, open, stop })
    }

    /// The dependency goes away: open connections are cut, new ones refused.
    pub fn cut(&self) {
        self.down.store(true, Ordering::SeqCst);
        if let Ok(mut list) = self.open.lock() {
            for c in list.drain(..) {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }

    /// The dependency is back.
    pub fn restore(&self) {
        self.down.store(false, Ordering::SeqCst);
    }

    /// `url` with its `host:port` replaced by this proxy's address.
    pub fn rewrite(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let (userinfo, _) = authority.rsplit_once('@').map_or(("", authority), |(u, h)| (u, h));
        let at = if userinfo.is_empty() { String::new() } else { format!("{userinfo}@") };
        format!("{scheme}://{at}{}/{path}", self.addr)
    }
}

impl Drop for Chaos {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.cut();
    }
}

/// `host:port` of a URL.
pub fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    authority.rsplit_once('@').map_or(authority, |(_, h)| h).to_string()
}
