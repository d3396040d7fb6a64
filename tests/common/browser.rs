//! Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! the browser reads commands on fd 3 and writes replies and events on fd 4, each message a
//! JSON text ended by a NUL byte), for the HTML report's tests.

use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

pub struct Browser {
    child: Child,
    to: File,
    from: Receiver<Value>,
    next_id: u64,
    /// Events received so far (every session), in order.
    pub events: Vec<Value>,
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

impl Browser {
    /// Start `chromium` headless, its profile in `profile` (a fresh folder).
    pub fn launch(chromium: &Path, profile: &Path) -> Browser {
        let (cmd_read, cmd_write) = pipe();
        let (out_read, out_write) = pipe();
        let mut c = Command::new(chromium);
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-pipe",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            "--mute-audio",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        unsafe {
            c.pre_exec(move || {
                // Out of the way first (either may be 3 or 4), then into place.
                let a = libc::fcntl(cmd_read, libc::F_DUPFD, 10);
                let b = libc::fcntl(out_write, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c.spawn().expect("starting chromium");
        unsafe {
            libc::close(cmd_read);
            libc::close(out_write);
        }
        let to = unsafe { File::from_raw_fd(cmd_write) };
        let from = unsafe { File::from_raw_fd(out_read) };
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(from);
            loop {
                let mut buf = Vec::new();
                match r.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        buf.pop();
                        if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                            && tx.send(v).is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
        Browser {
            child,
            to,
            from: rx,
            next_id: 1,
            events: Vec::new(),
        }
    }

    /// Send a command (to a page's session, or to the browser) and wait for its result.
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("writing to chromium");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = self
                .recv(deadline)
                .unwrap_or_else(|| panic!("{method}: no reply"));
            if m["id"] == json!(id) {
                if let Some(e) = m.get("error") {
                    panic!("{method}: {e}");
                }
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    fn recv(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.from.recv_timeout(left) {
            Ok(v) => Some(v),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("chromium exited"),
        }
    }

    /// Wait for an event `method` of `session` received from now on or already queued after
    /// `since` (an index into [`Browser::events`]).
    pub fn wait_event(&mut self, session: &str, method: &str, since: usize) -> Value {
        let seen = |e: &Value| e["method"] == json!(method) && e["sessionId"] == json!(session);
        if let Some(e) = self.events[since..].iter().find(|e| seen(e)) {
            return e.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = self
                .recv(deadline)
                .unwrap_or_else(|| panic!("no {method} within 60 s"));
            self.events.push(m.clone());
            if seen(&m) {
                return m;
            }
        }
    }

    /// Take what arrived without waiting.
    pub fn drain(&mut self) {
        while let Ok(m) = self.from.try_recv() {
            self.events.push(m);
        }
    }

    /// A new page, attached: its session id.
    pub fn new_page(&mut self) -> String {
        let t = self.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let a = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": t["targetId"], "flatten": true}),
        );
        let s = a["sessionId"].as_str().unwrap().to_string();
        for m in [
            "Page.enable",
            "Runtime.enable",
            "Log.enable",
            "Network.enable",
        ] {
            self.call(Some(&s), m, json!({}));
        }
        self.call(
            Some(&s),
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        s
    }

    /// Evaluate `expr` in the page, awaiting a promise; its value as JSON.
    pub fn eval(&mut self, session: &str, expr: &str) -> Value {
        let r = self.call(
            Some(session),
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("evaluating {expr}: {e}");
        }
        r["result"]["value"].clone()
    }

    /// A left click at page coordinates `(x, y)` of the viewport.
    pub fn click(&mut self, session: &str, x: f64, y: f64) {
        for (t, buttons) in [("mouseMoved", 0), ("mousePressed", 1), ("mouseReleased", 0)] {
            self.call(
                Some(session),
                "Input.dispatchMouseEvent",
                json!({"type": t, "x": x, "y": y, "button": if t == "mouseMoved" { "none" } else { "left" },
                       "buttons": buttons, "clickCount": 1}),
            );
        }
    }

    /// A PNG of the whole page.
    pub fn screenshot(&mut self, session: &str) -> Vec<u8> {
        use base64::Engine;
        let r = self.call(
            Some(session),
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
