//! A fake npm registry on 127.0.0.1 for the tests of `agent.install` (issue 51): it serves
//! the packages a test makes (each version a gzipped tarball built here, with its sha512
//! integrity), answers 404 for anything else, and logs every request. Point npm at it with
//! `npm_config_registry`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MAX_HEAD: usize = 64 * 1024;

/// One version of a package: its files (path in the package, text, executable or not) and
/// the commands it installs (`bin`: command name → file).
#[derive(Clone, Debug)]
pub struct TestPackage {
    pub name: String,
    pub version: String,
    pub files: Vec<(String, String, bool)>,
    pub bin: Vec<(String, String)>,
}

impl TestPackage {
    /// A package whose one command `command` is the shell script `script`.
    pub fn with_command(name: &str, version: &str, command: &str, script: &str) -> TestPackage {
        TestPackage {
            name: name.to_owned(),
            version: version.to_owned(),
            files: vec![("cli.sh".to_owned(), script.to_owned(), true)],
            bin: vec![(command.to_owned(), "cli.sh".to_owned())],
        }
    }

    fn manifest(&self) -> Value {
        let bin: BTreeMap<&str, &str> =
            self.bin.iter().map(|(c, f)| (c.as_str(), f.as_str())).collect();
        json!({"name": self.name, "version": self.version, "bin": bin})
    }

    /// The `.tgz` npm downloads: everything under `package/`.
    fn tarball(&self) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut tar = tar::Builder::new(gz);
        let manifest = self.manifest().to_string();
        let files = std::iter::once(("package.json", manifest.as_str(), false))
            .chain(self.files.iter().map(|(p, t, x)| (p.as_str(), t.as_str(), *x)));
        for (path, text, executable) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(text.len() as u64);
            header.set_mode(if executable { 0o755 } else { 0o644 });
            header.set_mtime(0);
            header.set_cksum();
            tar.append_data(&mut header, format!("package/{path}"), text.as_bytes()).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    }
}

struct Served {
    /// Package name → its packument.
    packuments: BTreeMap<String, Value>,
    /// Tarball path → bytes.
    tarballs: BTreeMap<String, Vec<u8>>,
}

/// The running registry; stops when dropped.
pub struct FakeRegistry {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeRegistry {
    /// Serves `packages` (several versions of a name make one package; the last listed is
    /// `latest`).
    pub async fn start(packages: &[TestPackage]) -> std::io::Result<FakeRegistry> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mut served = Served { packuments: BTreeMap::new(), tarballs: BTreeMap::new() };
        for package in packages {
            let bytes = package.tarball();
            let digest = sha2::Sha512::digest(&bytes);
            let integrity =
                format!("sha512-{}", base64::engine::general_purpose::STANDARD.encode(digest));
            let file =
                format!("/tarballs/{}-{}.tgz", package.name.replace('/', "-"), package.version);
            let mut version = package.manifest();
            version["dist"] = json!({
                "tarball": format!("http://127.0.0.1:{port}{file}"),
                "integrity": integrity,
            });
            let packument = served
                .packuments
                .entry(package.name.clone())
                .or_insert_with(|| json!({"name": package.name, "dist-tags": {}, "versions": {}}));
            packument["versions"][&package.version] = version;
            packument["dist-tags"]["latest"] = json!(package.version);
            served.tarballs.insert(file, bytes);
        }
        let served = Arc::new(served);
        let log = Arc::new(Mutex::new(vec![]));
        let task = tokio::spawn(accept(listener, served, log.clone()));
        Ok(FakeRegistry { port, log, task })
    }

    /// `http://127.0.0.1:<port>/`, for `npm_config_registry`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Every request so far: `<method> <path> <status>`.
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

async fn accept(listener: TcpListener, served: Arc<Served>, log: Arc<Mutex<Vec<String>>>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer(stream, served.clone(), log.clone()));
    }
}

/// Reads one request head and answers it, closing the connection.
async fn answer(mut stream: TcpStream, served: Arc<Served>, log: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let path = target.replace("%2f", "/").replace("%2F", "/");
    let found = match method {
        "GET" => served
            .tarballs
            .get(&path)
            .map(|bytes| ("application/octet-stream", bytes.clone()))
            .or_else(|| {
                let packument = served.packuments.get(path.trim_start_matches('/'))?;
                Some(("application/json", packument.to_string().into_bytes()))
            }),
        _ => None,
    };
    let (status, kind, body) = match found {
        Some((kind, body)) => ("200 OK", kind, body),
        None => ("404 Not Found", "application/json", br#"{"error":"not found"}"#.to_vec()),
    };
    log.lock().unwrap().push(format!("{method} {target} {}", &status[..3]));
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
}
