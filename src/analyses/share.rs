//! Shares: the per-process map step of the analyses (and of `compare`). A share reads one
//! process — its steady-state GPU frames or its compile frame — and is a stored node of its
//! own, keyed by what it reads, so a run with one more process computes one more share per
//! analysis and reads the others from the store. The reduce of an analysis reads the shares
//! of every process through [`RunShares`].

use crate::engine::kinds::family;
use std::any::Any;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use arrow::array::RecordBatch;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::engine::node::{Keep, Node};
use crate::engine::value::Value;
use crate::engine::{Engine, Key, KeyBuilder};
use crate::formats::gpus::DeviceFacts;
use crate::frames::gpu::Programs;
use crate::frames::warmup::Steady;

family!(
    /// One process's share of an analysis (named by the share), with the share's file;
    /// the sum of a group of them is `<share>-group`.
    SHARE = ""
);

/// What of a process a share reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// The steady-state module and thunk frames (split with the run's warm-up context), the
    /// remarks made building them and, on demand, the decoded HLO of its programs.
    Gpu,
    /// The compile frame (push/pop ranges of the compiler).
    Compile,
    /// What the archive says of the run: `run`'s record and the report's system and GPU
    /// facts (`formats::run_metadata::Provenance`).
    Provenance,
}

/// One process as a share's map step sees it.
pub struct ProcessView<'a> {
    /// The process, as notes name it (archive file and stem).
    pub label: &'a str,
    /// [`Reads::Gpu`]: the steady-state frames; None when the process has no GPU projection
    /// (an NVTX-only capture).
    pub steady: Option<&'a Steady>,
    /// [`Reads::Gpu`]: the remarks made building the frames, each naming the process.
    pub frame_notes: &'a [String],
    /// [`Reads::Gpu`]: the copies and sets between modules (`frames::between_modules`); None when
    /// the archive does not say.
    pub transfers: Option<&'a RecordBatch>,
    /// [`Reads::Gpu`]: every module execution, warm-up included (the module frame).
    pub modules: Option<&'a RecordBatch>,
    /// [`Reads::Gpu`]: the program's own NVTX ranges and marks (`formats::user_nvtx`); None
    /// when the archive does not say.
    pub user_nvtx: Option<&'a RecordBatch>,
    /// [`Reads::Gpu`]: the memory allocations and frees (`formats::memory_usage`); None when
    /// the archive does not say.
    pub memory_usage: Option<&'a RecordBatch>,
    /// [`Reads::Compile`]: the compile frame; None without push/pop ranges.
    pub compile: Option<&'a RecordBatch>,
    /// [`Reads::Provenance`]: what the archive says of the run.
    pub provenance: Option<&'a crate::formats::run_metadata::Provenance>,
    /// [`Reads::Gpu`]: the decoded HLO of the process's programs (decoded on first use).
    pub programs: &'a (dyn Fn() -> Result<Arc<Programs>> + 'a),
    /// For a share that reads them ([`Share::DEVICES`]): what the archive's device metadata
    /// says of its GPUs (empty without the file).
    pub devices: &'a (dyn Fn() -> Result<Vec<DeviceFacts>> + 'a),
}

impl ProcessView<'_> {
    /// `f` of the steady-state frames and the decoded programs; the default value for a
    /// process without a GPU projection.
    pub fn with_programs<T: Default>(&self, f: impl FnOnce(&Steady, &Programs) -> T) -> Result<T> {
        let Some(steady) = self.steady else {
            return Ok(T::default());
        };
        let programs = (self.programs)()?;
        Ok(f(steady, &programs))
    }
}

/// The map step of an analysis, for one process.
pub trait Share: Sync + 'static {
    /// The node kind of its values.
    const KIND: &'static str;
    /// The file implementing it (`file!()`): its version is that of the code this file
    /// reaches, with the graph's share code.
    const FILE: &'static str;
    const READS: Reads;
    /// How its values are kept in memory: a share read once, into the stored sum of its
    /// group of processes (see [`Share::add_up`]), is better dropped once read (`Volatile`).
    const KEEP: Keep = Keep::Stored;
    /// Whether it reads the archive's device metadata ([`ProcessView::devices`]; its key
    /// then includes that file's).
    const DEVICES: bool = false;
    /// Its parameters (`()` for none); part of the key.
    type Param: Serialize + DeserializeOwned + Default + Send + Sync;
    type Value: Value + Clone;

    fn map(&self, p: &ProcessView, param: &Self::Param) -> Result<Self::Value>;

    /// For a share whose values add up (the compile-time sums): the sum of `parts`. The graph
    /// then stores sums of groups of processes, so a reduce over many processes reads one
    /// stored sum per group (and computes those sums before the reduces, in parallel: a
    /// reduce reads such a share through [`RunShares::group_sums`]).
    fn add_up(&self, _parts: &[Self::Value]) -> Option<Self::Value> {
        None
    }
}

/// A share's value with its type erased.
pub type AnyValue = Arc<dyn Any + Send + Sync>;

/// What, besides its kind and version, a share node's key is made of (the graph computes it).
#[derive(Clone, Debug)]
pub struct ShareInputs {
    /// The key of what the share reads: the process's GPU frames or compile frame.
    pub frames: Key,
    /// The part of the run's warm-up context this process's split depends on (GPU shares).
    pub context: Key,
    /// The share's parameters, canonical JSON.
    pub param: String,
    /// The process label (shares carry notes naming their process).
    pub label: String,
}

/// The node of one process's share of `S`.
pub struct ShareNode<'a, S> {
    /// The share (its kind, version and parameters are `S`'s).
    pub share: std::marker::PhantomData<&'a S>,
    pub inputs: &'a ShareInputs,
}

impl<S: Share> Node for ShareNode<'_, S> {
    type Value = S::Value;
    const KEEP: Keep = S::KEEP;
    fn kind(&self) -> &str {
        S::KIND
    }
    fn roots(&self) -> Vec<&'static str> {
        SHARE.roots_with(&[S::FILE])
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        let kb = kb.input(&self.inputs.frames);
        let kb = match S::READS {
            Reads::Gpu => kb.input(&self.inputs.context),
            Reads::Compile | Reads::Provenance => kb,
        };
        kb.param("param", &self.inputs.param)
            .param("label", &self.inputs.label)
    }
}

/// The node of the sum of a group of processes' shares of `S` (see [`Share::add_up`]).
pub struct GroupNode<'a, S> {
    pub share: std::marker::PhantomData<&'a S>,
    pub kind: String,
    /// The keys of the group's shares, in process order.
    pub members: &'a [Key],
}

impl<S: Share> Node for GroupNode<'_, S> {
    type Value = S::Value;
    const KEEP: Keep = Keep::Stored;
    fn kind(&self) -> &str {
        &self.kind
    }
    fn roots(&self) -> Vec<&'static str> {
        SHARE.roots_with(&[S::FILE])
    }
    fn recipe(&self, kb: KeyBuilder) -> KeyBuilder {
        kb.inputs(self.members.iter())
    }
}

/// A share with its types erased, as the graph schedules and computes it.
pub trait AnyShare: Sync {
    fn kind(&self) -> &'static str;
    /// The files implementing it (see [`Share::FILE`]).
    fn roots(&self) -> Vec<&'static str>;
    fn reads(&self) -> Reads;
    /// Whether it reads the device metadata (see [`Share::DEVICES`]).
    fn reads_devices(&self) -> bool;
    /// Its default parameters, canonical JSON.
    fn default_param(&self) -> String;
    fn key(&self, inputs: &ShareInputs) -> Key;
    /// The map step on one process (parameters as canonical JSON).
    fn map_view(&self, view: &ProcessView, param: &str) -> Result<Box<dyn Any + Send>>;
    /// The stored value of the share node, or the one `map` computes (by way of
    /// [`AnyShare::map_view`]), then stored.
    fn compute(
        &self,
        engine: &Engine,
        inputs: &ShareInputs,
        map: &dyn Fn() -> Result<Box<dyn Any + Send>>,
    ) -> Result<(Key, AnyValue)>;
    /// Whether the share's values add up (see [`Share::add_up`]).
    fn adds_up(&self) -> bool;
    /// The stored or computed sum of a group of shares (None: the share does not add up).
    fn group(
        &self,
        engine: &Engine,
        label: &str,
        members: &[Key],
        parts: &dyn Fn() -> Result<Vec<AnyValue>>,
    ) -> Result<Option<AnyValue>>;
}

impl<S: Share> AnyShare for S {
    fn kind(&self) -> &'static str {
        S::KIND
    }
    fn roots(&self) -> Vec<&'static str> {
        SHARE.roots_with(&[S::FILE])
    }
    fn reads(&self) -> Reads {
        S::READS
    }
    fn reads_devices(&self) -> bool {
        S::DEVICES
    }
    fn default_param(&self) -> String {
        serde_json::to_string(&S::Param::default()).expect("plain parameters")
    }
    fn key(&self, inputs: &ShareInputs) -> Key {
        ShareNode {
            share: std::marker::PhantomData::<&S>,
            inputs,
        }
        .key()
    }
    fn map_view(&self, view: &ProcessView, param: &str) -> Result<Box<dyn Any + Send>> {
        let p: S::Param = serde_json::from_str(param)
            .map_err(|e| anyhow!("share {}: parameters {param}: {e}", S::KIND))?;
        Ok(Box::new(self.map(view, &p)?))
    }
    fn compute(
        &self,
        engine: &Engine,
        inputs: &ShareInputs,
        map: &dyn Fn() -> Result<Box<dyn Any + Send>>,
    ) -> Result<(Key, AnyValue)> {
        let node = ShareNode {
            share: std::marker::PhantomData::<&S>,
            inputs,
        };
        let (key, v) = engine.compute(&node, &inputs.label, || {
            map()?
                .downcast::<S::Value>()
                .map(|b| *b)
                .map_err(|_| anyhow!("a share value of another type (a bug)"))
        })?;
        Ok((key, v))
    }
    fn adds_up(&self) -> bool {
        self.add_up(&[]).is_some()
    }
    fn group(
        &self,
        engine: &Engine,
        label: &str,
        members: &[Key],
        parts: &dyn Fn() -> Result<Vec<AnyValue>>,
    ) -> Result<Option<AnyValue>> {
        if !self.adds_up() {
            return Ok(None);
        }
        let node = GroupNode {
            share: std::marker::PhantomData::<&S>,
            kind: format!("{}-group", S::KIND),
            members,
        };
        let (_, v) = engine.compute(&node, label, || {
            let parts = parts()?
                .into_iter()
                .map(|p| Ok(downcast::<S::Value>(p)?.as_ref().clone()))
                .collect::<Result<Vec<_>>>()?;
            Ok(self.add_up(&parts).expect("a share that adds up"))
        })?;
        Ok(Some(v))
    }
}

/// The typed value behind an erased one.
pub fn downcast<T: Send + Sync + 'static>(v: AnyValue) -> Result<Arc<T>> {
    v.downcast::<T>()
        .map_err(|_| anyhow!("a share value of another type (a bug)"))
}

/// The shares of every process of a run, as a reduce reads them.
pub trait RunShares {
    /// How many processes the run has.
    fn processes(&self) -> usize;
    /// Process `i`'s share (parameters as canonical JSON).
    fn share(&self, share: &dyn AnyShare, param: &str, i: usize) -> Result<AnyValue>;
    /// The sums of a share over consecutive groups of processes, in process order (for a
    /// share that adds up).
    fn group_sums(&self, share: &dyn AnyShare) -> Result<Vec<AnyValue>>;
    /// The output of another registered analysis on the run, with these (canonical)
    /// parameters: one the asking analysis names in its `Analysis::upstream` (stored, or
    /// computed once and stored).
    fn upstream(&self, name: &str, params: &str) -> Result<Arc<super::output::AnalysisOutput>>;
}

impl dyn RunShares + '_ {
    /// Every process's share of `S`, in process order.
    pub fn all<S: Share>(&self, s: &S, param: &S::Param) -> Result<Vec<Arc<S::Value>>> {
        let param = serde_json::to_string(param)?;
        (0..self.processes())
            .map(|i| downcast::<S::Value>(self.share(s, &param, i)?))
            .collect()
    }

    /// Every process's share of `S`, in process order, as owned values.
    pub fn values<S: Share>(&self, s: &S, param: &S::Param) -> Result<Vec<S::Value>> {
        Ok(self
            .all(s, param)?
            .iter()
            .map(|v| v.as_ref().clone())
            .collect())
    }

    /// The sums of `S` over the run's groups of processes.
    pub fn sums<S: Share>(&self, s: &S) -> Result<Vec<Arc<S::Value>>> {
        self.group_sums(s)?
            .into_iter()
            .map(downcast::<S::Value>)
            .collect()
    }
}
