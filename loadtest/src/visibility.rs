//! How long one upload takes to become visible in a hosted APT repository that already holds
//! many packages (or in a group over it): seeds the repository, then uploads one package at a
//! time into the idle repository and times from the upload's 201 until `Release` has changed
//! and `Packages` lists the package (a conditional GET of `Release` every 2 ms, then `Packages`
//! once).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::http::{Conn, Endpoint, Request};
use crate::{apt, basic, get};

const PACKAGES: &str = "dists/stable/main/binary-amd64/Packages";

fn upload(auth: &str, name: &str, payload: &[u8]) -> anyhow::Result<Request> {
    let body = apt::deb(name, "1.0", "amd64", payload)?;
    Ok(Request {
        method: "POST",
        path: String::new(),
        headers: vec![
            ("Authorization".into(), basic(auth)),
            ("Content-Type".into(), "application/vnd.debian.binary-package".into()),
        ],
        body: Some(Arc::new(body)),
    })
}

/// Uploads packages `seed-0` … `seed-{n-1}` (payload `bytes`) from `concurrency` connections,
/// then waits until `Packages` lists all of them. Returns how long it took.
pub async fn seed(base: &str, auth: &str, n: usize, bytes: usize, concurrency: usize) -> anyhow::Result<Duration> {
    let endpoint = Endpoint::parse(base)?;
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let payload = Arc::new(apt::filler(7, bytes));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (endpoint, next, payload, auth) = (endpoint.clone(), next.clone(), payload.clone(), auth.to_string());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(endpoint);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let r = conn.send(&upload(&auth, &format!("seed-{i}"), &payload)?, true).await?;
                anyhow::ensure!(
                    r.status == 201,
                    "seed upload {i} answered {}: {}",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                );
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let mut conn = Conn::new(endpoint);
    loop {
        let r = conn.send(&get(PACKAGES), true).await?;
        if r.status == 200 && count(&r.body, "Package: seed-") == n {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(3600),
            "the seeded packages are not visible after an hour"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn memchr_str(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn count(hay: &[u8], needle: &str) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle.as_bytes()).count()
}

/// Where uploads go and where they must become visible.
pub struct Watch<'a> {
    /// The hosted repository's base URL.
    pub target: &'a str,
    /// The repository whose `Packages` must list them (the target, or a group over it).
    pub watched: &'a str,
    pub dist: &'a str,
}

/// `samples` uploads, one at a time, each `pause` after the previous became visible; the time
/// from each 201 until it is visible, in milliseconds.
pub async fn measure(
    watch: &Watch<'_>,
    auth: &str,
    samples: usize,
    pause: Duration,
    run: &str,
) -> anyhow::Result<Vec<f64>> {
    let mut up = Conn::new(Endpoint::parse(watch.target)?);
    let mut poll = Conn::new(Endpoint::parse(watch.watched)?);
    let release = format!("dists/{}/Release", watch.dist);
    let packages = format!("dists/{}/main/binary-amd64/Packages", watch.dist);
    let payload = apt::filler(11, 1024);
    let etag_of = |r: &crate::http::Response| {
        r.headers.iter().find(|(k, _)| k == "etag").map(|(_, v)| v.clone()).unwrap_or_default()
    };
    let r = poll.send(&get(&release), false).await?;
    anyhow::ensure!(r.status == 200, "{release} answered {}", r.status);
    let mut etag = etag_of(&r);
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        tokio::time::sleep(pause).await;
        let name = format!("visible-{run}-{i}");
        let r = up.send(&upload(auth, &name, &payload)?, true).await?;
        anyhow::ensure!(r.status == 201, "upload {name} answered {}: {}", r.status, String::from_utf8_lossy(&r.body));
        let acknowledged = Instant::now();
        let needle = format!("Package: {name}\n");
        loop {
            let mut req = get(&release);
            req.headers.push(("If-None-Match".into(), etag.clone()));
            let r = poll.send(&req, false).await?;
            if r.status == 200 {
                let seen = acknowledged.elapsed();
                let p = poll.send(&get(&packages), true).await?;
                if p.status == 200 && memchr_str(&p.body, &needle) {
                    etag = etag_of(&r);
                    out.push(seen.as_secs_f64() * 1000.0);
                    break;
                }
                // Behind a balancer the new Release may come from one replica and Packages from
                // another that has not seen the snapshot yet: the old validator is kept, so that
                // the next replica with the new Release answers it in full again.
            } else {
                anyhow::ensure!(r.status == 304, "{release} answered {}", r.status);
            }
            anyhow::ensure!(acknowledged.elapsed() < Duration::from_secs(120), "{name} not visible after 120 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    Ok(out)
}
