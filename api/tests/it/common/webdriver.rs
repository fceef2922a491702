//! A small W3C WebDriver client for the web UI's tests: Debian's `chromedriver` driving
//! Debian's `chromium`, headless, over HTTP (ureq). `TEST_CHROMEDRIVER` names the driver
//! (`scripts/test.sh` sets it); without it the UI's browser tests say they were skipped.
#![allow(dead_code)]

use super::process::free_port;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

/// The key W3C WebDriver names an element reference by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Browser {
    driver: Child,
    url: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = ureq::delete(&format!("{}/session/{}", self.url, self.session)).call();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// An element found on the page.
#[derive(Debug, Clone)]
pub struct Element(String);

/// The driver to use, or `None` (skipped) when `TEST_CHROMEDRIVER` is unset.
pub fn driver() -> Option<String> {
    match std::env::var("TEST_CHROMEDRIVER") {
        Ok(d) if !d.is_empty() => Some(d),
        _ => {
            eprintln!("skipped: TEST_CHROMEDRIVER is not set (scripts/test.sh installs chromium and chromium-driver)");
            None
        }
    }
}

impl Browser {
    /// Starts the driver and a headless Chromium session with a fresh profile.
    pub fn start(driver: &str) -> anyhow::Result<Self> {
        let port = free_port()?;
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {driver}: {e}"))?;
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while ureq::get(&format!("{url}/status")).call().is_err() {
            anyhow::ensure!(Instant::now() < deadline, "{driver} did not answer on port {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir()?;
        let binary = std::env::var("TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": binary,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                         "--disable-background-networking", "--disable-sync", "--hide-scrollbars",
                         format!("--user-data-dir={}", profile.path().display())],
            },
        }}});
        let mut browser = Self { driver: child, url, session: String::new(), _profile: profile };
        let reply = browser.call("POST", "/session", Some(caps))?;
        browser.session =
            reply["sessionId"].as_str().ok_or_else(|| anyhow::anyhow!("no session in {reply}"))?.to_string();
        Ok(browser)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = if path == "/session" {
            format!("{}{path}", self.url)
        } else {
            format!("{}/session/{}{path}", self.url, self.session)
        };
        let req = ureq::request(method, &url).timeout(Duration::from_secs(60));
        let res = match body {
            Some(b) => req.send_json(b),
            None if method == "POST" => req.send_json(json!({})),
            None => req.call(),
        };
        match res {
            Ok(r) => {
                let v: Value = r.into_json()?;
                Ok(v.get("value").cloned().unwrap_or(Value::Null))
            }
            Err(ureq::Error::Status(code, r)) => {
                let text = r.into_string().unwrap_or_default();
                anyhow::bail!("WebDriver {method} {path}: {code} {text}")
            }
            Err(e) => anyhow::bail!("WebDriver {method} {path}: {e}"),
        }
    }

    pub fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.call("POST", "/url", Some(json!({"url": url})))?;
        self.wait_for("body", Duration::from_secs(10))?;
        Ok(())
    }

    pub fn current_url(&self) -> anyhow::Result<String> {
        Ok(self.call("GET", "/url", None)?.as_str().unwrap_or_default().to_string())
    }

    pub fn title(&self) -> anyhow::Result<String> {
        Ok(self.call("GET", "/title", None)?.as_str().unwrap_or_default().to_string())
    }

    pub fn source(&self) -> anyhow::Result<String> {
        Ok(self.call("GET", "/source", None)?.as_str().unwrap_or_default().to_string())
    }

    /// The page's visible text.
    pub fn text_of_page(&self) -> anyhow::Result<String> {
        // A page just navigated to may still be replacing the previous document.
        let body = self.wait_for("body", Duration::from_secs(10))?;
        match self.text(&body) {
            Ok(t) => Ok(t),
            Err(_) => {
                let body = self.wait_for("body", Duration::from_secs(10))?;
                self.text(&body)
            }
        }
    }

    fn element_of(v: &Value) -> anyhow::Result<Element> {
        v.get(ELEMENT)
            .and_then(Value::as_str)
            .map(|s| Element(s.to_string()))
            .ok_or_else(|| anyhow::anyhow!("not an element: {v}"))
    }

    pub fn find(&self, css: &str) -> anyhow::Result<Element> {
        let v = self
            .call("POST", "/element", Some(json!({"using": "css selector", "value": css})))
            .map_err(|e| anyhow::anyhow!("{css}: {e}"))?;
        Self::element_of(&v)
    }

    pub fn find_all(&self, css: &str) -> anyhow::Result<Vec<Element>> {
        let v = self.call("POST", "/elements", Some(json!({"using": "css selector", "value": css})))?;
        v.as_array().map(|a| a.iter().map(Self::element_of).collect()).unwrap_or_else(|| Ok(Vec::new()))
    }

    /// The first element `css` finds whose text contains `text`.
    pub fn find_by_text(&self, css: &str, text: &str) -> anyhow::Result<Element> {
        for e in self.find_all(css)? {
            if self.text(&e)?.contains(text) {
                return Ok(e);
            }
        }
        anyhow::bail!("no {css} with text {text:?} on {}", self.current_url()?)
    }

    pub fn text(&self, e: &Element) -> anyhow::Result<String> {
        Ok(self.call("GET", &format!("/element/{}/text", e.0), None)?.as_str().unwrap_or_default().to_string())
    }

    pub fn attribute(&self, e: &Element, name: &str) -> anyhow::Result<Option<String>> {
        Ok(self.call("GET", &format!("/element/{}/attribute/{name}", e.0), None)?.as_str().map(str::to_string))
    }

    pub fn click(&self, e: &Element) -> anyhow::Result<()> {
        self.call("POST", &format!("/element/{}/click", e.0), None)?;
        Ok(())
    }

    /// Clicks `e`, which navigates (a link, a form's button), and waits until the new page has
    /// replaced the old one and loaded: the old window's marker is gone and the document is
    /// complete. Waiting for an element instead could find the old page's copy of it.
    pub fn click_to_load(&self, e: &Element) -> anyhow::Result<()> {
        self.to_load(|| self.click(e))
    }

    /// Presses `keys` (which navigate: Enter on a link or in a form) and waits as
    /// [`Browser::click_to_load`] does.
    pub fn keys_to_load(&self, keys: &str) -> anyhow::Result<()> {
        self.to_load(|| self.keys(keys))
    }

    fn to_load(&self, act: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
        self.exec("window.__packyardOld = true;", vec![])?;
        act()?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // A script asked mid-navigation may fail; ask again.
            let state = self
                .exec("return [window.__packyardOld === true, document.readyState];", vec![])
                .unwrap_or(Value::Null);
            if state[0] == json!(false) && state[1] == json!("complete") {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!("the page did not change after the click: {state}");
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    pub fn type_into(&self, e: &Element, text: &str) -> anyhow::Result<()> {
        self.call("POST", &format!("/element/{}/clear", e.0), None)?;
        self.call("POST", &format!("/element/{}/value", e.0), Some(json!({"text": text})))?;
        Ok(())
    }

    /// Fills the field `css` finds.
    pub fn fill(&self, css: &str, text: &str) -> anyhow::Result<()> {
        let e = self.find(css)?;
        self.type_into(&e, text)
    }

    /// Presses keys in the focused element (`\u{E007}` is Enter).
    pub fn keys(&self, keys: &str) -> anyhow::Result<()> {
        let actions: Vec<Value> = keys
            .chars()
            .flat_map(|c| {
                [json!({"type": "keyDown", "value": c.to_string()}), json!({"type": "keyUp", "value": c.to_string()})]
            })
            .collect();
        self.call(
            "POST",
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )?;
        Ok(())
    }

    /// Runs `script` in the page (a function body; `arguments` holds `args`).
    pub fn exec(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        self.call("POST", "/execute/sync", Some(json!({"script": script, "args": args})))
    }

    /// The cookies the browser holds for the current page, as WebDriver reports them (HttpOnly
    /// ones included: the browser's view, not a script's).
    pub fn cookies(&self) -> anyhow::Result<Vec<Value>> {
        Ok(self.call("GET", "/cookie", None)?.as_array().cloned().unwrap_or_default())
    }

    pub fn delete_cookies(&self) -> anyhow::Result<()> {
        self.call("DELETE", "/cookie", None)?;
        Ok(())
    }

    /// The browser console's messages since the last call.
    pub fn console(&self) -> anyhow::Result<Vec<String>> {
        let v = self.call("POST", "/se/log", Some(json!({"type": "browser"})))?;
        Ok(v.as_array()
            .map(|a| a.iter().filter_map(|m| m["message"].as_str().map(str::to_string)).collect())
            .unwrap_or_default())
    }

    /// Emulates the system's colour scheme (`dark` or `light`) for `prefers-color-scheme`, through
    /// ChromeDriver's DevTools endpoint.
    pub fn prefer_color_scheme(&self, scheme: &str) -> anyhow::Result<()> {
        self.call(
            "POST",
            "/goog/cdp/execute",
            Some(json!({"cmd": "Emulation.setEmulatedMedia",
                "params": {"features": [{"name": "prefers-color-scheme", "value": scheme}]}})),
        )?;
        Ok(())
    }

    /// The element that has the keyboard focus, described: tag, id, text or label, its place in
    /// the document, and whether a focus ring is drawn (an outline or a box shadow).
    pub fn focused(&self) -> anyhow::Result<Value> {
        self.exec(
            "const e = document.activeElement; const s = getComputedStyle(e);\
             return {tag: e.tagName.toLowerCase(), id: e.id, name: e.getAttribute('name') || '',\
               text: (e.innerText || e.value || e.getAttribute('aria-label') || '').trim().slice(0, 60),\
               href: e.getAttribute('href') || '', at: [...document.querySelectorAll('*')].indexOf(e),\
               ring: (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none'};",
            vec![],
        )
    }

    pub fn set_window(&self, width: u32, height: u32) -> anyhow::Result<()> {
        self.call("POST", "/window/rect", Some(json!({"width": width, "height": height})))?;
        Ok(())
    }

    /// A PNG of the whole page (the window resized to its height first).
    pub fn screenshot(&self, to: &Path, width: u32) -> anyhow::Result<()> {
        let height =
            self.exec("return Math.ceil(document.documentElement.scrollHeight);", vec![])?.as_u64().unwrap_or(900);
        self.set_window(width, (height as u32).clamp(400, 4000) + 100)?;
        let png = self.call("GET", "/screenshot", None)?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap_or_default())?;
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(to, bytes)?;
        self.set_window(1280, 900)?;
        Ok(())
    }

    /// Waits until `css` finds an element.
    pub fn wait_for(&self, css: &str, timeout: Duration) -> anyhow::Result<Element> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.find(css) {
                Ok(e) => return Ok(e),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}
