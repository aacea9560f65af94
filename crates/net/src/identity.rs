//! Whose data a node directory holds, and who is using it.
//!
//! A node's directory records the cluster id, the node id and an
//! *incarnation*: a random number drawn when the directory's first log is
//! created. A node refuses to start on a directory of another node or
//! cluster (a config pointing at the wrong place would otherwise come up
//! empty, or worse, on someone else's log), and takes an exclusive lock on it
//! so two processes can never share one log.
//!
//! The incarnation is what peer links are bound to: sequence numbers and
//! acknowledgements on a link mean something only between two given
//! incarnations. A node that lost its data directory comes back as a new
//! incarnation, and its peers, which remember the old one, refuse the link
//! loudly instead of silently dropping its new messages as duplicates (or
//! resending into a gap it can never fill).

use causeway_core::{DATA_FORMAT, NodeId};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use thiserror::Error;

const FILE: &str = "identity.toml";
const LOCK: &str = "lock";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub cluster_id: String,
    pub node: u32,
    pub incarnation: u64,
    /// The [`DATA_FORMAT`] of the directory's log and snapshots. Directories
    /// made before the field existed are format 1.
    #[serde(default = "format_one")]
    pub format: u32,
    /// Where in the cluster's shape the node stood when the directory was
    /// made (its role, DC and the node count, e.g. `eunomia 1 of DC 0, one
    /// of 15 nodes`): node ids are positions in the topology, so the same id
    /// under another shape is another node. Directories made before the
    /// field existed have none and are not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<String>,
}

fn format_one() -> u32 {
    1
}

#[derive(Debug, Error)]
pub enum IdentityError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} is not a valid identity file: {reason}")]
    Unreadable { path: String, reason: String },
    #[error(
        "{dir} holds the data of node {found_node} of cluster {found_cluster:?}, not node {node} of cluster \
         {cluster:?}; refusing to start on another node's data (check data_dir and --node)"
    )]
    Foreign { dir: String, found_cluster: String, found_node: u32, cluster: String, node: u32 },
    #[error(
        "{dir} holds data in format {found}, written by another version of Causeway; this build reads format \
         {supported} only. Run the version that wrote it, or move the directory aside to start the node empty \
         (peers and clients of another format are refused too, so upgrade the whole cluster)"
    )]
    Format { dir: String, found: u32, supported: u32 },
    #[error(
        "{dir} holds the data of {found}, but this config makes node {node} {place}: the cluster's shape (DCs, \
         partitions, replicas or service nodes) changed under the same cluster id. Give this shape its own \
         data_dir (or cluster_id), or move the directory aside to start the node empty"
    )]
    Shape { dir: String, found: String, node: u32, place: String },
    #[error("{dir} is in use by another process (its lock is held); refusing to share a log")]
    Locked { dir: String },
}

/// A node directory, locked for this process until dropped.
pub struct NodeDir {
    pub identity: Identity,
    /// Held open for the lock; the lock goes with it.
    _lock: File,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> IdentityError + '_ {
    move |source| IdentityError::Io { path: path.display().to_string(), source }
}

impl NodeDir {
    /// Lock `dir` and check (or, for a new directory, record) whose it is:
    /// `place` says where node `node` stands in the cluster's shape
    /// ([`Identity::place`]).
    pub fn open(dir: &Path, cluster_id: &str, node: NodeId, place: &str) -> Result<NodeDir, IdentityError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let lock_path = dir.join(LOCK);
        let lock = File::options().create(true).truncate(false).write(true).open(&lock_path).map_err(io(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(IdentityError::Locked { dir: dir.display().to_string() });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(&lock_path)(e)),
        }
        let path = dir.join(FILE);
        let identity = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let id: Identity = toml::from_str(&text).map_err(|e| IdentityError::Unreadable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                if id.cluster_id != cluster_id || id.node != node.0 {
                    return Err(IdentityError::Foreign {
                        dir: dir.display().to_string(),
                        found_cluster: id.cluster_id,
                        found_node: id.node,
                        cluster: cluster_id.to_string(),
                        node: node.0,
                    });
                }
                if let Some(found) = id.place.as_ref().filter(|found| *found != place) {
                    return Err(IdentityError::Shape {
                        dir: dir.display().to_string(),
                        found: found.clone(),
                        node: node.0,
                        place: place.to_string(),
                    });
                }
                if id.format != DATA_FORMAT {
                    return Err(IdentityError::Format {
                        dir: dir.display().to_string(),
                        found: id.format,
                        supported: DATA_FORMAT,
                    });
                }
                id
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let id = Identity {
                    cluster_id: cluster_id.to_string(),
                    node: node.0,
                    incarnation: fresh_incarnation(),
                    format: DATA_FORMAT,
                    place: Some(place.to_string()),
                };
                write_durably(&path, &toml::to_string(&id).expect("an identity serialises"))?;
                id
            }
            Err(e) => return Err(io(&path)(e)),
        };
        Ok(NodeDir { identity, _lock: lock })
    }
}

/// A new incarnation: random, so that two lives of a node (or an impostor
/// that knows the cluster and node ids) practically never share one. 63 bits:
/// TOML integers are signed.
fn fresh_incarnation() -> u64 {
    use rand::Rng;
    loop {
        let x: u64 = rand::rng().random::<u64>() >> 1;
        if x != 0 {
            return x;
        }
    }
}

/// Write `text` to `path` through a synced temporary file and a rename, so a
/// crash leaves the old file or the new one, never half of one.
fn write_durably(path: &Path, text: &str) -> Result<(), IdentityError> {
    use std::io::Write;
    let tmp: PathBuf = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(text.as_bytes()).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))?;
    if let Some(d) = path.parent() {
        File::open(d).and_then(|d| d.sync_all()).map_err(io(d))?;
    }
    Ok(())
}

/// Each peer's incarnation as this node knows it, shared by the acceptor
/// (hellos), the links (welcomes) and the protocol thread (which logs what
/// is learned). A peer's first incarnation is learned; a different one later
/// is refused.
pub struct PeerIncarnations {
    known: Mutex<Vec<Option<u64>>>,
}

impl PeerIncarnations {
    pub fn new(n: usize, recovered: &std::collections::BTreeMap<NodeId, u64>) -> PeerIncarnations {
        let mut v = vec![None; n];
        for (node, inc) in recovered {
            if let Some(x) = v.get_mut(node.idx()) {
                *x = Some(*inc);
            }
        }
        PeerIncarnations { known: Mutex::new(v) }
    }

    /// Accept `got` as `node`'s incarnation, or say which one is known.
    pub fn check(&self, node: NodeId, got: u64) -> Result<(), u64> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        match known.get_mut(node.idx()) {
            Some(slot @ None) => {
                *slot = Some(got);
                Ok(())
            }
            Some(Some(k)) if *k == got => Ok(()),
            Some(Some(k)) => Err(*k),
            None => Err(0),
        }
    }

    pub fn snapshot(&self) -> Vec<Option<u64>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "partition 0 of DC 0, one of 2 nodes";

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("causeway-identity-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_directory_belongs_to_one_node_of_one_cluster() {
        let d = dir("own");
        let first = NodeDir::open(&d, "c", NodeId(1), P).unwrap().identity;
        let again = NodeDir::open(&d, "c", NodeId(1), P).unwrap().identity;
        assert_eq!(first, again, "the incarnation is kept across restarts");
        let e = NodeDir::open(&d, "c", NodeId(2), P).err().unwrap();
        assert!(matches!(e, IdentityError::Foreign { found_node: 1, node: 2, .. }), "{e}");
        let e = NodeDir::open(&d, "other", NodeId(1), P).err().unwrap();
        assert!(matches!(e, IdentityError::Foreign { .. }), "{e}");
        // A lost directory comes back as a new incarnation.
        std::fs::remove_dir_all(&d).unwrap();
        let reborn = NodeDir::open(&d, "c", NodeId(1), P).unwrap().identity;
        assert_ne!(reborn.incarnation, first.incarnation);
    }

    #[test]
    fn a_directory_of_another_data_format_is_refused() {
        let d = dir("format");
        let id = NodeDir::open(&d, "c", NodeId(0), P).unwrap().identity;
        assert_eq!(id.format, DATA_FORMAT);
        // A directory made before the format was recorded is format 1.
        let old = format!("cluster_id = \"c\"\nnode = 0\nincarnation = {}\n", id.incarnation);
        std::fs::write(d.join(FILE), old).unwrap();
        let e = NodeDir::open(&d, "c", NodeId(0), P).err().unwrap();
        assert!(matches!(e, IdentityError::Format { found: 1, supported: DATA_FORMAT, .. }), "{e}");
        assert!(e.to_string().contains("format 1"), "{e}");
    }

    /// Node ids are positions in the topology: node 7 of a cluster with
    /// two Eunomia replicas per DC is not node 7 of one with one. A
    /// directory made before places were recorded is not checked.
    #[test]
    fn a_directory_of_another_cluster_shape_is_refused() {
        let d = dir("shape");
        let id = NodeDir::open(&d, "c", NodeId(7), "eunomia 1 of DC 0, one of 15 nodes").unwrap().identity;
        assert_eq!(id.place.as_deref(), Some("eunomia 1 of DC 0, one of 15 nodes"));
        let e = NodeDir::open(&d, "c", NodeId(7), "receiver 0 of DC 0, one of 12 nodes").err().unwrap();
        assert!(matches!(e, IdentityError::Shape { node: 7, .. }), "{e}");
        assert!(e.to_string().contains("eunomia 1 of DC 0") && e.to_string().contains("receiver 0 of DC 0"), "{e}");
        let old = format!("cluster_id = \"c\"\nnode = 7\nincarnation = {}\nformat = {DATA_FORMAT}\n", id.incarnation);
        std::fs::write(d.join(FILE), old).unwrap();
        NodeDir::open(&d, "c", NodeId(7), "receiver 0 of DC 0, one of 12 nodes").unwrap();
    }

    #[test]
    fn a_directory_is_used_by_one_process_at_a_time() {
        let d = dir("lock");
        let held = NodeDir::open(&d, "c", NodeId(0), P).unwrap();
        let e = NodeDir::open(&d, "c", NodeId(0), P).err().unwrap();
        assert!(matches!(e, IdentityError::Locked { .. }), "{e}");
        drop(held);
        NodeDir::open(&d, "c", NodeId(0), P).unwrap();
    }

    #[test]
    fn a_peer_keeps_its_first_incarnation() {
        let p = PeerIncarnations::new(3, &[(NodeId(2), 7)].into_iter().collect());
        assert_eq!(p.check(NodeId(2), 7), Ok(()));
        assert_eq!(p.check(NodeId(2), 8), Err(7));
        assert_eq!(p.check(NodeId(1), 5), Ok(()));
        assert_eq!(p.check(NodeId(1), 6), Err(5));
    }
}
