//! A real S3-protocol server (moto's standalone server) on a free localhost port, for the
//! remote cache's tests; stopped when dropped. Requests the tests make themselves (creating a
//! bucket, listing it, writing over an object) are plain HTTP: the server checks no signature
//! unless started with IAM checks on.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct S3Server {
    child: Child,
    pub port: u16,
}

/// A free localhost port (bound, then let go).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl S3Server {
    /// Start `server` (a `moto_server` program) with `env` added to its environment.
    pub fn start(server: &Path, env: &[(&str, &str)]) -> S3Server {
        let port = free_port();
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", server.display()));
        let s = S3Server { child, port };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the S3 server did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        s
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// One plain HTTP request; the status code and body.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let text = String::from_utf8_lossy(&out);
        let code = text[9..12].parse().unwrap();
        let start = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        (code, out[start..].to_vec())
    }

    pub fn create_bucket(&self, bucket: &str) {
        let (code, body) = self.request("PUT", &format!("/{bucket}"), b"");
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// The keys of the objects under `prefix` in `bucket`.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut token = String::new();
        loop {
            let (code, body) = self.request(
                "GET",
                &format!("/{bucket}?list-type=2&prefix={prefix}{token}"),
                b"",
            );
            assert_eq!(code, 200);
            let xml = String::from_utf8_lossy(&body).into_owned();
            for part in xml.split("<Key>").skip(1) {
                keys.push(part.split("</Key>").next().unwrap().to_string());
            }
            match xml.split("<NextContinuationToken>").nth(1) {
                Some(t) => {
                    let t = t.split('<').next().unwrap();
                    token = format!(
                        "&continuation-token={}",
                        t.replace('=', "%3D")
                            .replace('+', "%2B")
                            .replace('/', "%2F")
                    );
                }
                None => break,
            }
        }
        keys
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The environment that points the binary at `server`'s bucket.
pub fn env_for(endpoint: &str, key: &str, secret: &str) -> Vec<(String, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID".into(), key.into()),
        ("AWS_SECRET_ACCESS_KEY".into(), secret.into()),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_ENDPOINT_URL".into(), endpoint.into()),
    ]
}

/// Two users of a server started with IAM checks on (`INITIAL_NO_AUTH_ACTION_COUNT=7`: the
/// seven set-up requests made here go unchecked): a writer allowed everything and a reader
/// allowed to read; creates `bucket`. Returns ((writer key, secret), (reader key, secret)).
pub fn reader_and_writer(
    python: &Path,
    endpoint: &str,
    bucket: &str,
) -> ((String, String), (String, String)) {
    const SCRIPT: &str = r#"
import boto3, json, sys
ep, bucket = sys.argv[1], sys.argv[2]
kw = dict(endpoint_url=ep, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
boto3.client("s3", **kw).create_bucket(Bucket=bucket)
iam = boto3.client("iam", **kw)
keys = []
for user, actions in [("writer", ["s3:*"]), ("reader", ["s3:GetObject", "s3:ListBucket"])]:
    iam.create_user(UserName=user)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    iam.put_user_policy(UserName=user, PolicyName="cache", PolicyDocument=json.dumps(policy))
    k = iam.create_access_key(UserName=user)["AccessKey"]
    keys.append([k["AccessKeyId"], k["SecretAccessKey"]])
print(json.dumps(keys))
"#;
    let o = Command::new(python)
        .args(["-c", SCRIPT, endpoint, bucket])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let keys: Vec<(String, String)> = serde_json::from_slice(&o.stdout).unwrap();
    (keys[0].clone(), keys[1].clone())
}

/// A TCP proxy in front of a server that stops the server (and itself) when the
/// `after`-th + 1 HTTP request arrives: a server that goes away in the middle of a run.
pub struct StoppingProxy {
    pub port: u16,
    stopped: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StoppingProxy {
    pub fn start(server: S3Server, after: usize) -> StoppingProxy {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::{Arc, Mutex};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let upstream = server.port;
        let server = Arc::new(Mutex::new(server));
        let stopped = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let sockets: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop = {
            let (server, stopped, sockets) = (server.clone(), stopped.clone(), sockets.clone());
            Arc::new(move || {
                if !stopped.swap(true, Ordering::SeqCst) {
                    server.lock().unwrap().stop();
                    for s in sockets.lock().unwrap().drain(..) {
                        let _ = s.shutdown(std::net::Shutdown::Both);
                    }
                }
            })
        };
        let flag = stopped.clone();
        std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                client.set_nonblocking(false).unwrap();
                let Ok(up) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                {
                    let mut s = sockets.lock().unwrap();
                    s.push(client.try_clone().unwrap());
                    s.push(up.try_clone().unwrap());
                }
                // Client to server, counting request lines.
                let (mut from, mut to) = (client.try_clone().unwrap(), up.try_clone().unwrap());
                let (requests, stop) = (requests.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let lines = buf[..n]
                            .windows(11)
                            .filter(|w| w == b" HTTP/1.1\r\n")
                            .count();
                        if requests.fetch_add(lines, Ordering::SeqCst) + lines > after {
                            stop();
                            break;
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
                // Server to client.
                let (mut from, mut to) = (up, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
            // Dropping the listener: new connections are refused.
        });
        StoppingProxy { port, stopped }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Write `body` over object `key` of `bucket` with a signed request (boto3, from the server's
/// virtual environment), as any client of the bucket could.
pub fn put_object(python: &Path, endpoint: &str, bucket: &str, key: &str, body: &[u8]) {
    const SCRIPT: &str = r#"
import boto3, sys
ep, bucket, key = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
s3.put_object(Bucket=bucket, Key=key, Body=sys.stdin.buffer.read())
"#;
    let mut child = Command::new(python)
        .args(["-c", SCRIPT, endpoint, bucket, key])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Every object under `prefix` in `bucket`, read with signed requests (boto3, from the
/// server's virtual environment): key -> bytes.
pub fn get_objects(
    python: &Path,
    endpoint: &str,
    bucket: &str,
    prefix: &str,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    const SCRIPT: &str = r#"
import base64, boto3, json, sys
ep, bucket, prefix = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
out = {}
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
    for o in page.get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        out[o["Key"]] = base64.b64encode(body).decode()
json.dump(out, sys.stdout)
"#;
    let o = Command::new(python)
        .args(["-c", SCRIPT, endpoint, bucket, prefix])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let map: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&o.stdout).unwrap();
    use base64::Engine as _;
    map.into_iter()
        .map(|(k, v)| {
            (
                k,
                base64::engine::general_purpose::STANDARD.decode(v).unwrap(),
            )
        })
        .collect()
}
