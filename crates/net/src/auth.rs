//! Who may do what: bearer tokens with roles.
//!
//! TLS ([`crate::tls`]) proves that a connection comes from a holder of a
//! certificate of this cluster; tokens say what that holder may do. With
//! `[auth] tokens = "FILE"` in the cluster config, every client session —
//! over the client protocol, through a node's Redis front door (`AUTH`), or
//! on the dashboard's HTTP API (`Authorization: Bearer`) — must present a
//! token listed in FILE, and gets that token's [`Role`]:
//!
//! - `read-only`: reads and read-only transactions; every request that
//!   writes ([`causeway_core::Message::is_write`]) is refused.
//! - `read-write`: reads and writes.
//! - `admin`: also the dashboard, its cluster API and `/metrics`.
//!
//! The file holds only SHA-256 digests of the secrets (a leaked file grants
//! nothing) and is re-read when it changes: `causeway token revoke NAME`
//! takes effect on the next connection, without a restart. Sessions already
//! open keep the role they started with (as a TLS session keeps its
//! certificate); restart the node to cut them.
//!
//! Without `[auth]` every session may read and write, and nothing is gated:
//! the cluster's certificates (or `plaintext`) are the only door.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;
use thiserror::Error;

/// What a token allows, in increasing order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ReadOnly,
    ReadWrite,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::ReadWrite => "read-write",
            Role::Admin => "admin",
        }
    }

    pub fn may_write(self) -> bool {
        self >= Role::ReadWrite
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = AuthError;
    fn from_str(s: &str) -> Result<Role, AuthError> {
        match s {
            "read-only" | "ro" => Ok(Role::ReadOnly),
            "read-write" | "rw" => Ok(Role::ReadWrite),
            "admin" => Ok(Role::Admin),
            other => Err(AuthError::UnknownRole(other.to_string())),
        }
    }
}

#[derive(Debug, Error)]
pub enum AuthError {
    #[error("tokens file {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("tokens file {path} is not valid: {reason}")]
    Invalid { path: String, reason: String },
    #[error("unknown role {0:?}: expected read-only, read-write or admin")]
    UnknownRole(String),
    #[error("a token name must be 1–64 characters of letters, digits, '-', '_' or '.', got {0:?}")]
    BadName(String),
    #[error("tokens file {path} already has a token named {name:?} (revoke it first)")]
    Exists { path: String, name: String },
    #[error("tokens file {path} has no token named {name:?}")]
    NoSuchToken { path: String, name: String },
}

/// One line of the tokens file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    pub name: String,
    pub role: Role,
    /// Hex SHA-256 of the secret.
    pub sha256: String,
}

/// The tokens file: `[[token]]` tables.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenFile {
    #[serde(default)]
    pub token: Vec<TokenEntry>,
}

impl TokenFile {
    pub fn read(path: &Path) -> Result<TokenFile, AuthError> {
        let p = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TokenFile::default()),
            Err(source) => return Err(AuthError::Io { path: p, source }),
        };
        let f: TokenFile =
            toml::from_str(&text).map_err(|e| AuthError::Invalid { path: p.clone(), reason: e.to_string() })?;
        for (i, t) in f.token.iter().enumerate() {
            check_name(&t.name).map_err(|e| AuthError::Invalid { path: p.clone(), reason: e.to_string() })?;
            if t.sha256.len() != 64 || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                let reason = format!("token {:?}: sha256 must be 64 hex digits", t.name);
                return Err(AuthError::Invalid { path: p, reason });
            }
            if f.token[..i].iter().any(|u| u.name == t.name) {
                return Err(AuthError::Invalid { path: p, reason: format!("token {:?} is listed twice", t.name) });
            }
        }
        Ok(f)
    }

    /// Write atomically (a node re-reading it never sees half a file), and
    /// readable only by its owner.
    pub fn write(&self, path: &Path) -> Result<(), AuthError> {
        let p = path.display().to_string();
        let io = |source| AuthError::Io { path: p.clone(), source };
        let text = format!(
            "# Causeway access tokens: SHA-256 digests of the secrets, never the secrets.\n\
             # Managed by `causeway token add|list|revoke`; nodes re-read it when it changes.\n\n{}",
            toml::to_string(self).expect("a token file serializes")
        );
        let tmp = path.with_extension("tmp");
        {
            use std::io::Write;
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
            let mut f = opts.open(&tmp).map_err(io)?;
            f.write_all(text.as_bytes()).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Add a token named `name` with `role`; returns its secret, which is
    /// stored nowhere.
    pub fn add(&mut self, path: &Path, name: &str, role: Role) -> Result<String, AuthError> {
        check_name(name)?;
        if self.token.iter().any(|t| t.name == name) {
            return Err(AuthError::Exists { path: path.display().to_string(), name: name.into() });
        }
        let secret = new_secret();
        self.token.push(TokenEntry { name: name.into(), role, sha256: digest(&secret) });
        Ok(secret)
    }

    pub fn revoke(&mut self, path: &Path, name: &str) -> Result<TokenEntry, AuthError> {
        let i = self
            .token
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| AuthError::NoSuchToken { path: path.display().to_string(), name: name.into() })?;
        Ok(self.token.remove(i))
    }

    fn find(&self, secret: &str) -> Option<Grant> {
        let d = digest(secret);
        // Digests of secrets are compared, so timing reveals nothing useful
        // about a secret; every entry is still visited.
        let mut found = None;
        for t in &self.token {
            if constant_eq(t.sha256.as_bytes(), d.as_bytes()) {
                found = Some(Grant { name: t.name.clone(), role: t.role });
            }
        }
        found
    }
}

fn check_name(name: &str) -> Result<(), AuthError> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok { Ok(()) } else { Err(AuthError::BadName(name.into())) }
}

fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Hex SHA-256 of a secret.
pub fn digest(secret: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// 160 random bits from the operating system, as `cwt_` and 40 hex digits.
pub fn new_secret() -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 20];
    ring::rand::SystemRandom::new().fill(&mut b).expect("the OS random number generator works");
    format!("cwt_{}", b.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// Who a valid token names, and what it may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub name: String,
    pub role: Role,
}

/// A node's view of the tokens file, re-read when its modification time
/// changes.
pub struct Tokens {
    path: PathBuf,
    state: Mutex<(Option<SystemTime>, TokenFile)>,
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl Tokens {
    /// Load the file; an unreadable or malformed file is an error at start
    /// (a node never starts with an access list it could not read). A file
    /// that does not exist yet is an empty list: nobody gets in until
    /// `causeway token add` makes one.
    pub fn open(path: &Path) -> Result<Tokens, AuthError> {
        let m = mtime(path);
        let f = TokenFile::read(path)?;
        Ok(Tokens { path: path.to_path_buf(), state: Mutex::new((m, f)) })
    }

    /// The grant of `secret`, or `None`. A change to the file is picked up
    /// here; a change that does not parse keeps the last good list (and is
    /// logged), so a half-edited file never opens the door.
    pub fn check(&self, secret: &str) -> Option<Grant> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let m = mtime(&self.path);
        if m != st.0 {
            match TokenFile::read(&self.path) {
                Ok(f) => *st = (m, f),
                Err(e) => {
                    tracing::error!("keeping the previous token list: {e}");
                    st.0 = m;
                }
            }
        }
        st.1.find(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_checked_by_digest_and_revocation_is_picked_up() {
        let dir = std::env::temp_dir().join(format!("causeway-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens.toml");
        let _ = std::fs::remove_file(&path);
        let mut f = TokenFile::read(&path).unwrap();
        let ro = f.add(&path, "reader", Role::ReadOnly).unwrap();
        let rw = f.add(&path, "writer", Role::ReadWrite).unwrap();
        assert!(matches!(f.add(&path, "reader", Role::Admin), Err(AuthError::Exists { .. })));
        assert!(matches!(f.add(&path, "no spaces", Role::Admin), Err(AuthError::BadName(_))));
        f.write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&ro) && !text.contains(&rw), "secrets are not stored");

        let t = Tokens::open(&path).unwrap();
        assert_eq!(t.check(&ro), Some(Grant { name: "reader".into(), role: Role::ReadOnly }));
        assert_eq!(t.check(&rw).map(|g| g.role), Some(Role::ReadWrite));
        assert_eq!(t.check("cwt_0000"), None);
        assert_eq!(t.check(""), None);

        let mut f = TokenFile::read(&path).unwrap();
        f.revoke(&path, "reader").unwrap();
        // Make sure the modification time moves even on coarse clocks.
        std::thread::sleep(std::time::Duration::from_millis(20));
        f.write(&path).unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(2);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(later).unwrap();
        assert_eq!(t.check(&ro), None, "revoked");
        assert!(t.check(&rw).is_some());

        std::fs::write(&path, "[[token]]\nname = 'x'\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later + std::time::Duration::from_secs(2))
            .unwrap();
        assert!(t.check(&rw).is_some(), "a malformed edit keeps the last good list");
        assert!(matches!(Tokens::open(&path), Err(AuthError::Invalid { .. })));
        assert!(matches!("superuser".parse::<Role>(), Err(AuthError::UnknownRole(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
