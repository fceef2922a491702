//! A RabbitMQ virtual host of a test's own: wake-ups on the machine's broker go to one queue
//! name, so workers of tests running side by side would wake each other; a test that counts
//! on no wake-up but its own runs its processes in a vhost made for it (removed on drop).
#![allow(dead_code)]

use std::process::Command;

pub struct Vhost {
    name: String,
    /// The broker URL with the vhost.
    pub url: String,
}

fn rabbitmqctl(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("rabbitmqctl").args(args).output()?;
    anyhow::ensure!(
        out.status.success(),
        "rabbitmqctl {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

impl Vhost {
    /// A new vhost `name` on the broker of `url` (`amqp://user:password@host:port/…`), the URL's
    /// user allowed everything in it.
    pub fn create(url: &str, name: &str) -> anyhow::Result<Self> {
        let (base, _) = url.rsplit_once('/').ok_or_else(|| anyhow::anyhow!("no vhost in {url}"))?;
        let user = url.split_once("://").and_then(|(_, r)| r.split_once(':')).map_or("guest", |(u, _)| u);
        let _ = rabbitmqctl(&["delete_vhost", name]);
        rabbitmqctl(&["add_vhost", name])?;
        rabbitmqctl(&["set_permissions", "-p", name, user, ".*", ".*", ".*"])?;
        Ok(Self { name: name.to_string(), url: format!("{base}/{name}") })
    }
}

impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = rabbitmqctl(&["delete_vhost", &self.name]);
    }
}
