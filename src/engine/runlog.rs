//! The record of one run: which nodes executed, which were reused, and how long each took.
//! Written as `OUTDIR/pipeline-run.json`; `--explain` prints it as a table.

use super::key::Key;
use serde::Serialize;
use std::sync::Mutex;

#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Executed,
    Reused,
}

#[derive(Serialize, Clone, Debug)]
pub struct NodeRecord {
    pub kind: String,
    pub key: Key,
    pub status: Status,
    pub ms: f64,
    /// What the node was about (an input name, an analysis name); not part of the contract.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub label: String,
}

#[derive(Serialize, Clone, Debug)]
pub struct RunRecord {
    pub nodes: Vec<NodeRecord>,
    pub executed: usize,
    pub reused: usize,
    pub wall_ms: f64,
    /// The inputs of the run, as given (filled by the command that writes the record).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// The files the run wrote in its output folder, relative to it (this record included).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
    /// What the remote tier of the cache did, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteRecord>,
}

#[derive(Serialize, Clone, Debug)]
pub struct RemoteRecord {
    pub url: String,
    #[serde(flatten)]
    pub counts: crate::store::remote::RemoteCounts,
}

#[derive(Default)]
pub struct RunLog {
    nodes: Mutex<Vec<NodeRecord>>,
}

impl RunLog {
    /// Forget the records so far (a long-lived process starting its next update).
    pub fn clear(&self) {
        self.nodes.lock().unwrap().clear();
    }

    pub fn push(&self, rec: NodeRecord) {
        self.nodes.lock().unwrap().push(rec);
    }

    pub fn finish(&self, wall_ms: f64) -> RunRecord {
        let nodes = self.nodes.lock().unwrap().clone();
        let executed = nodes
            .iter()
            .filter(|n| n.status == Status::Executed)
            .count();
        RunRecord {
            reused: nodes.len() - executed,
            executed,
            nodes,
            wall_ms,
            inputs: Vec::new(),
            outputs: Vec::new(),
            remote: None,
        }
    }
}

impl RunRecord {
    /// A readable table of the run.
    pub fn table(&self) -> String {
        let mut t = crate::table::Table::new(&["node", "about", "key", "status", "ms"]);
        t.align_right(&[4]);
        for n in &self.nodes {
            t.row(vec![
                n.kind.clone(),
                n.label.clone(),
                n.key.short(),
                match n.status {
                    Status::Executed => "executed".into(),
                    Status::Reused => "reused".into(),
                },
                format!("{:.1}", n.ms),
            ]);
        }
        format!(
            "{}\n{} executed, {} reused, {:.1} ms wall\n",
            t.render(),
            self.executed,
            self.reused,
            self.wall_ms
        )
    }
}
