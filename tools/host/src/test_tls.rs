//! Self-signed certificates for the tests of TLS connections, made by the
//! `openssl` command line tool.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A certificate and its key as PEM files in a directory of their own,
/// removed on drop.
pub struct SelfSigned {
    dir: PathBuf,
}

impl SelfSigned {
    /// A certificate for `subject_alt_name` (such as `IP:127.0.0.1` or
    /// `DNS:localhost`), or `None` (the test is skipped) without `openssl`.
    pub fn make(name: &str, subject_alt_name: &str) -> Option<SelfSigned> {
        let dir = std::env::temp_dir().join(format!("unread-host-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let made = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=unread-host test"])
            .args(["-addext", &format!("subjectAltName={subject_alt_name}"), "-keyout", "key.pem", "-out", "cert.pem"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !made.is_ok_and(|status| status.success()) {
            eprintln!("skipping: openssl cannot make a certificate");
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        Some(SelfSigned { dir })
    }

    /// The directory holding `cert.pem` and `key.pem`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The certificate, PEM.
    pub fn cert_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("cert.pem")).unwrap()
    }

    /// The private key, PEM (PKCS #8).
    pub fn key_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("key.pem")).unwrap()
    }
}

impl Drop for SelfSigned {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
