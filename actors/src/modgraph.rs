//! Kernel assembly: the kernel's modules form a dependency graph, and the
//! boot order comes from that graph.
//!
//! # Why a graph and not a hand-written init order
//!
//! A hand-written sequence of `init_x(); init_y(); ...` holds dependency
//! knowledge that nothing checks. Add a module, move a call, or make one
//! module need another, and the sequence can quietly go wrong. Often that
//! means a missing value at runtime, far from where the mistake was made.
//! Here every [`Module`] declares what it needs ([`Module::requires`]) and
//! what it makes ready ([`Module::provides`]), using facility names from
//! [`homeagent_plugin_protocol::facility`]. `requires` means "I need this to
//! be *ready*". It does not mean "I must run after that module". The order is
//! derived from the declarations, never written by hand.
//!
//! Assembly has two steps:
//!
//! 1. [`ModuleGraph::build`] turns the declarations into *layers*. A module's
//!    layer is `1 + the highest layer of the providers of its requirements`,
//!    or 0 if it has no requirements. A misspelled or missing facility, two
//!    providers of one facility, a cycle, or a duplicate module name is
//!    rejected here, before any init runs. Each error lists every declared
//!    facility, so a typo shows up at once.
//! 2. [`ModuleGraph::run`] executes the plan one layer at a time. The inits
//!    of one layer run concurrently, joined on the current thread (the actix
//!    System thread). Before each layer, the kernel state is asked through
//!    [`Produced`] whether each required facility *was really produced*. A
//!    module that declares a facility and then does not make it ready is
//!    caught there, before anything uses it.
//!
//! # Invariants
//!
//! * Module names are unique, and each facility has at most one provider.
//! * Every required facility is provided by exactly one module of the graph.
//! * The graph has no cycles, so every module gets a finite layer.
//! * A module's providers are all in strictly lower layers. So modules of the
//!   same layer never depend on each other, and running them concurrently is
//!   safe. They must write disjoint parts of the kernel state.
//! * A layer starts only after the whole previous layer has finished without
//!   error, and only after [`Produced::produced`] confirms every requirement
//!   of that layer.
//! * Inits are polled together on one thread, not spawned. A synchronous,
//!   blocking init therefore stalls its whole layer. Move blocking work to
//!   `spawn_blocking` or to an actor.
//!
//! Orderings that exist only because of side effects ("this must take effect
//! before that": logging, the first heartbeat, opening the config database)
//! are not "produces data for" relations. They stay outside the graph and run
//! in sequence before [`ModuleGraph::run`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use futures_util::future::{LocalBoxFuture, join_all};
use homeagent_plugin_protocol::facility::Facility;

/// The error a module's init returns.
///
/// Any `std::error::Error + Send + Sync + 'static` converts with `?` or
/// `.into()`, and so do `String` and `&str`:
/// `return Err(format!("bad port {port}").into())`.
pub type ModuleError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// One node of the kernel assembly graph.
///
/// `S` is the kernel state: modules read what they require from it and
/// write what they provide into it.
pub trait Module<S: ?Sized>: Send + Sync {
    /// Unique node name, shown in the topology and in errors.
    fn name(&self) -> &'static str;
    /// Facilities that must be ready before [`Module::init`] runs.
    fn requires(&self) -> &'static [Facility];
    /// Facilities that this module's init makes ready.
    fn provides(&self) -> &'static [Facility];
    /// Runs on the actix System thread; inits of one layer run concurrently (joined).
    fn init<'a>(&'a self, state: &'a S) -> LocalBoxFuture<'a, Result<(), ModuleError>>;
}

/// Implemented by the kernel state: which facilities have really been produced so far.
pub trait Produced {
    /// Whether `facility` is ready in the state now (for example, its field is set).
    fn produced(&self, facility: Facility) -> bool;
}

/// A requirement that no module provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unmet {
    /// The module that requires the facility.
    pub module: &'static str,
    /// The facility nobody provides.
    pub facility: Facility,
}

/// Why the declarations cannot be turned into a boot plan.
///
/// Every variant's `Display` lists all declared (provided) facilities, sorted.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// A required facility that no module provides, usually a typo.
    #[error(
        "kernel graph: module `{module}` requires facility `{facility}`, but no module provides it{}{}. \
         Declared facilities: {}. \
         Next: fix the name in `requires()` (use the constants in `homeagent_plugin_protocol::facility`) \
         or register the module that provides it.",
        suggestion(.facility, .declared),
        fmt_also_unmet(.also_missing),
        list(.declared)
    )]
    MissingFacility {
        module: &'static str,
        facility: Facility,
        /// Other unmet requirements found in the same pass.
        also_missing: Vec<Unmet>,
        declared: Vec<Facility>,
    },

    /// More than one module claims to provide the same facility.
    #[error(
        "kernel graph: facility `{facility}` is provided by more than one module: {}. \
         Declared facilities: {}. \
         Next: keep exactly one provider; the others should require `{facility}` instead.",
        list(.modules),
        list(.declared)
    )]
    DuplicateProvider {
        facility: Facility,
        /// The competing providers, sorted.
        modules: Vec<&'static str>,
        declared: Vec<Facility>,
    },

    /// Modules that require each other's facilities in a loop.
    #[error(
        "kernel graph: dependency cycle between modules {}: {}. \
         Declared facilities: {}. \
         Next: break the cycle, either by dropping one of these requirements or by moving \
         that facility to a module outside the cycle.",
        list(.modules),
        cycle_path(.modules, .via),
        list(.declared)
    )]
    Cycle {
        /// The modules on the cycle, in dependency order, starting with the smallest name.
        modules: Vec<&'static str>,
        /// `via[i]` is the facility `modules[i]` requires from `modules[i + 1]`
        /// (cyclically).
        via: Vec<Facility>,
        declared: Vec<Facility>,
    },

    /// Two registered modules have the same name.
    #[error(
        "kernel graph: module `{module}` is registered {count} times. \
         Declared facilities: {}. \
         Next: register each module once; module names must be unique.",
        list(.declared)
    )]
    DuplicateModule {
        module: &'static str,
        count: usize,
        declared: Vec<Facility>,
    },
}

/// Why executing the plan failed.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// A module is about to run, but a facility it requires is not ready,
    /// even though its provider's init returned `Ok`.
    #[error(
        "kernel boot: layer {layer}: module `{module}` requires facility `{facility}`, which \
         `{provider}` declares but did not produce. Next: make `{provider}`'s init produce \
         `{facility}` (set its kernel-state field), or return an error when it cannot."
    )]
    NotProduced {
        layer: usize,
        module: &'static str,
        facility: Facility,
        /// The module that declared the facility in `provides()`.
        provider: &'static str,
    },

    /// One or more inits of a layer failed. Later layers did not run.
    #[error(
        "kernel boot: layer {layer}: module `{module}` failed to init: {source}{}. \
         Boot stopped; later layers did not run.",
        fmt_also_failed(.also_failed)
    )]
    Init {
        layer: usize,
        /// The failing module with the smallest name in the layer.
        module: &'static str,
        source: ModuleError,
        /// Other modules of the same layer that failed too (by name).
        also_failed: Vec<(&'static str, ModuleError)>,
    },
}

/// How long one module's init took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleTiming {
    pub name: &'static str,
    pub layer: usize,
    pub duration: Duration,
}

/// The result of a successful [`ModuleGraph::run`].
#[derive(Debug, Clone, Default)]
pub struct BootReport {
    /// One entry per module, in layer order and by name within a layer.
    pub modules: Vec<ModuleTiming>,
    /// Time taken by each layer.
    pub layers: Vec<Duration>,
    /// Time for the whole run.
    pub total: Duration,
    /// Facilities, as `(provider, facility)`, that were declared but still
    /// not produced at the end. No module in the graph needed them, so the
    /// boot succeeded, but a plugin that requires one of them will fail.
    /// Each one is also logged as a warning.
    pub not_produced: Vec<(&'static str, Facility)>,
}

impl BootReport {
    /// How long `module`'s init took, if it ran.
    pub fn duration_of(&self, module: &str) -> Option<Duration> {
        self.modules.iter().find(|t| t.name == module).map(|t| t.duration)
    }
}

/// The resolved boot plan: modules grouped into layers.
pub struct ModuleGraph<S: ?Sized> {
    /// Modules per layer, sorted by name inside a layer.
    layers: Vec<Vec<Box<dyn Module<S>>>>,
    /// facility -> its single provider.
    providers: BTreeMap<Facility, &'static str>,
}

impl<S: ?Sized + Produced> ModuleGraph<S> {
    /// Checks the declarations and resolves the layers. No init runs here.
    pub fn build(modules: Vec<Box<dyn Module<S>>>) -> Result<Self, GraphError> {
        // Who provides what. A module that lists a facility twice still counts once.
        let mut claimed: BTreeMap<Facility, BTreeSet<&'static str>> = BTreeMap::new();
        for m in &modules {
            for &f in m.provides() {
                claimed.entry(f).or_default().insert(m.name());
            }
        }
        let declared: Vec<Facility> = claimed.keys().copied().collect();

        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for m in &modules {
            *counts.entry(m.name()).or_default() += 1;
        }
        if let Some((&module, &count)) = counts.iter().find(|&(_, &c)| c > 1) {
            return Err(GraphError::DuplicateModule {
                module,
                count,
                declared,
            });
        }

        if let Some((&facility, names)) = claimed.iter().find(|(_, names)| names.len() > 1) {
            return Err(GraphError::DuplicateProvider {
                facility,
                modules: names.iter().copied().collect(),
                declared,
            });
        }
        let providers: BTreeMap<Facility, &'static str> = claimed
            .into_iter()
            .filter_map(|(f, names)| names.first().map(|&n| (f, n)))
            .collect();

        // Sorting by name makes every later step and every error deterministic.
        let mut modules = modules;
        modules.sort_by_key(|m| m.name());
        let index: BTreeMap<&'static str, usize> = modules.iter().enumerate().map(|(i, m)| (m.name(), i)).collect();

        let mut missing = Vec::new();
        for m in &modules {
            let mut seen = BTreeSet::new();
            for &f in m.requires() {
                if seen.insert(f) && !providers.contains_key(f) {
                    missing.push(Unmet {
                        module: m.name(),
                        facility: f,
                    });
                }
            }
        }
        if !missing.is_empty() {
            let first = missing.remove(0);
            return Err(GraphError::MissingFacility {
                module: first.module,
                facility: first.facility,
                also_missing: missing,
                declared,
            });
        }

        // deps[i]: (provider index, facility), sorted by provider name, then facility.
        let deps: Vec<Vec<(usize, Facility)>> = modules
            .iter()
            .map(|m| {
                let set: BTreeSet<(usize, Facility)> = m.requires().iter().map(|&f| (index[providers[f]], f)).collect();
                set.into_iter().collect()
            })
            .collect();

        // A layer depends only on the final layers of the providers, so repeated
        // sweeps reach a fixpoint. Whatever stays unresolved is on or behind a cycle.
        let mut layer_of: Vec<Option<usize>> = vec![None; modules.len()];
        loop {
            let mut progress = false;
            for i in 0..modules.len() {
                if layer_of[i].is_some() {
                    continue;
                }
                let resolved: Option<Vec<usize>> = deps[i].iter().map(|&(d, _)| layer_of[d]).collect();
                if let Some(dep_layers) = resolved {
                    layer_of[i] = Some(dep_layers.into_iter().max().map_or(0, |l| l + 1));
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }

        if let Some(start) = layer_of.iter().position(Option::is_none) {
            let (cycle, via) = find_cycle(start, &deps, &layer_of);
            return Err(GraphError::Cycle {
                modules: cycle.iter().map(|&i| modules[i].name()).collect(),
                via,
                declared,
            });
        }

        let depth = layer_of.iter().flatten().max().map_or(0, |&l| l + 1);
        let mut layers: Vec<Vec<Box<dyn Module<S>>>> = (0..depth).map(|_| Vec::new()).collect();
        // `modules` is sorted by name, so each layer stays sorted by name.
        for (m, l) in modules.into_iter().zip(layer_of) {
            if let Some(l) = l {
                layers[l].push(m);
            }
        }

        Ok(Self { layers, providers })
    }

    /// Module names per layer, sorted by name inside a layer.
    pub fn layers(&self) -> Vec<Vec<&'static str>> {
        self.layers
            .iter()
            .map(|l| l.iter().map(|m| m.name()).collect())
            .collect()
    }

    /// One line per layer, for example `layer 0  config, event-bus`, without a
    /// trailing newline.
    pub fn topology(&self) -> String {
        self.layers()
            .iter()
            .enumerate()
            .map(|(i, names)| format!("layer {i}  {}", names.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every facility some module provides, sorted.
    pub fn declared(&self) -> Vec<Facility> {
        self.providers.keys().copied().collect()
    }

    /// The module that provides `facility`, if any.
    pub fn provider_of(&self, facility: &str) -> Option<&'static str> {
        self.providers.get(facility).copied()
    }

    /// Number of modules in the plan.
    pub fn module_count(&self) -> usize {
        self.layers.iter().map(Vec::len).sum()
    }

    /// Executes the plan one layer at a time (see the module docs).
    pub async fn run(&self, state: &S) -> Result<BootReport, BootError> {
        let boot_started = Instant::now();
        tracing::info!(
            modules = self.module_count(),
            layers = self.layers.len(),
            "kernel assembly: module graph"
        );
        for line in self.topology().lines() {
            tracing::info!("{line}");
        }

        let mut report = BootReport::default();
        for (layer, modules) in self.layers.iter().enumerate() {
            for m in modules {
                for &facility in m.requires() {
                    if !state.produced(facility) {
                        return Err(BootError::NotProduced {
                            layer,
                            module: m.name(),
                            facility,
                            provider: self.provider_of(facility).unwrap_or("?"),
                        });
                    }
                }
            }

            let layer_started = Instant::now();
            let results = join_all(modules.iter().map(|m| async move {
                let started = Instant::now();
                let result = m.init(state).await;
                (m.name(), started.elapsed(), result)
            }))
            .await;
            let elapsed = layer_started.elapsed();
            tracing::debug!(layer, ?elapsed, "kernel assembly: layer done");
            report.layers.push(elapsed);

            // join_all keeps input order, so failures come out sorted by name.
            let mut failures = Vec::new();
            for (name, duration, result) in results {
                report.modules.push(ModuleTiming { name, layer, duration });
                if let Err(e) = result {
                    failures.push((name, e));
                }
            }
            if !failures.is_empty() {
                let (module, source) = failures.remove(0);
                return Err(BootError::Init {
                    layer,
                    module,
                    source,
                    also_failed: failures,
                });
            }
        }

        for (&facility, &provider) in &self.providers {
            if !state.produced(facility) {
                tracing::warn!(
                    provider,
                    facility,
                    "kernel assembly: facility declared but not produced"
                );
                report.not_produced.push((provider, facility));
            }
        }
        report.total = boot_started.elapsed();
        Ok(report)
    }
}

impl<S: ?Sized> fmt::Debug for ModuleGraph<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layers: Vec<Vec<&'static str>> = self
            .layers
            .iter()
            .map(|l| l.iter().map(|m| m.name()).collect())
            .collect();
        f.debug_struct("ModuleGraph")
            .field("layers", &layers)
            .field("providers", &self.providers)
            .finish()
    }
}

/// Walks from `start` (an unresolved module) along unresolved dependencies
/// until a module repeats. Every unresolved module has an unresolved
/// dependency, so the walk always closes a cycle. Returns the cycle rotated to
/// start at its smallest index (modules are sorted by name), and the facility
/// of each edge.
fn find_cycle(
    start: usize,
    deps: &[Vec<(usize, Facility)>],
    layer_of: &[Option<usize>],
) -> (Vec<usize>, Vec<Facility>) {
    let mut path = vec![start];
    let mut via: Vec<Facility> = Vec::new();
    let mut pos: BTreeMap<usize, usize> = BTreeMap::from([(start, 0)]);
    loop {
        let cur = path[path.len() - 1];
        let Some(&(next, f)) = deps[cur].iter().find(|(d, _)| layer_of[*d].is_none()) else {
            // Unreachable if the fixpoint is correct; report what we have.
            return (path, via);
        };
        via.push(f);
        if let Some(&p) = pos.get(&next) {
            let mut cycle = path.split_off(p);
            let mut edges = via.split_off(p);
            let rot = cycle.iter().enumerate().min_by_key(|&(_, &i)| i).map_or(0, |(k, _)| k);
            cycle.rotate_left(rot);
            edges.rotate_left(rot);
            return (cycle, edges);
        }
        pos.insert(next, path.len());
        path.push(next);
    }
}

fn list(items: &[&'static str]) -> String {
    if items.is_empty() {
        "(none)".to_owned()
    } else {
        items.join(", ")
    }
}

fn fmt_also_unmet(more: &[Unmet]) -> String {
    if more.is_empty() {
        return String::new();
    }
    let items: Vec<String> = more
        .iter()
        .map(|u| format!("`{}` requires `{}`", u.module, u.facility))
        .collect();
    format!("; also unmet: {}", items.join(", "))
}

fn fmt_also_failed(more: &[(&'static str, ModuleError)]) -> String {
    if more.is_empty() {
        return String::new();
    }
    let items: Vec<String> = more.iter().map(|(m, e)| format!("`{m}`: {e}")).collect();
    format!("; also failed in this layer: {}", items.join("; "))
}

fn cycle_path(modules: &[&'static str], via: &[Facility]) -> String {
    modules
        .iter()
        .zip(via)
        .enumerate()
        .map(|(i, (m, f))| {
            let next = modules[(i + 1) % modules.len()];
            format!("`{m}` requires `{f}` from `{next}`")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `" (did you mean `x`?)"` when a declared facility is close to `wanted`.
fn suggestion(wanted: &str, declared: &[Facility]) -> String {
    let limit = (wanted.chars().count() / 3).max(1);
    declared
        .iter()
        .map(|&d| (edit_distance(wanted, d), d))
        .filter(|&(dist, _)| dist <= limit)
        .min()
        .map(|(_, d)| format!(" (did you mean `{d}`?)"))
        .unwrap_or_default()
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// One module's typed output in the kernel state, written once by the module that
/// provides `facility` and read by the modules that require it.
///
/// This replaces a bag of optional fields: a module reads *one* typed handle per
/// facility it requires (e.g. `&MemoryHandles`) and passes it on to typed start
/// functions, so the compiler checks what a subsystem is given; [`Slot::get`] fails
/// only on a wiring bug (a facility read without being listed in `requires()`), and
/// says so.
pub struct Slot<T> {
    facility: Facility,
    cell: std::sync::OnceLock<T>,
}

/// A slot was read before its module filled it, or filled twice.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    #[error(
        "kernel wiring bug: `{0}` was read before its module provided it; list the facility in the \
         reading module's `requires()` so the boot graph orders it"
    )]
    NotReady(Facility),
    #[error("kernel wiring bug: `{0}` was provided twice; only its one provider may fill it")]
    Twice(Facility),
}

impl<T> Slot<T> {
    /// An empty slot for `facility` (a facility name, or the module's name for
    /// outputs that are no facility).
    pub const fn new(facility: Facility) -> Self {
        Self {
            facility,
            cell: std::sync::OnceLock::new(),
        }
    }

    /// The module's output.
    pub fn get(&self) -> Result<&T, SlotError> {
        self.cell.get().ok_or(SlotError::NotReady(self.facility))
    }

    /// Fills the slot (once).
    pub fn provide(&self, value: T) -> Result<(), SlotError> {
        self.cell.set(value).map_err(|_| SlotError::Twice(self.facility))
    }

    /// Whether the module has filled it (for [`Produced`]).
    pub fn is_provided(&self) -> bool {
        self.cell.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use homeagent_plugin_protocol::facility::{AGENT, CONFIG, EVENT_BUS, LLM, MEMORY, REGISTRY};
    use std::sync::Mutex;
    use tokio::sync::oneshot;

    #[derive(Default)]
    struct TestState {
        produced: Mutex<BTreeSet<Facility>>,
        /// Module names in the order their inits started.
        started: Mutex<Vec<&'static str>>,
    }

    impl Produced for TestState {
        fn produced(&self, facility: Facility) -> bool {
            self.produced.lock().unwrap().contains(facility)
        }
    }

    enum Behavior {
        Produce,
        /// Returns Ok without producing anything.
        Forget,
        Fail(&'static str),
        /// Sends on `tx`, then waits on `rx`, then produces.
        Handshake {
            tx: Mutex<Option<oneshot::Sender<()>>>,
            rx: Mutex<Option<oneshot::Receiver<()>>>,
        },
    }

    struct TestModule {
        name: &'static str,
        requires: &'static [Facility],
        provides: &'static [Facility],
        behavior: Behavior,
    }

    impl Module<TestState> for TestModule {
        fn name(&self) -> &'static str {
            self.name
        }
        fn requires(&self) -> &'static [Facility] {
            self.requires
        }
        fn provides(&self) -> &'static [Facility] {
            self.provides
        }
        fn init<'a>(&'a self, state: &'a TestState) -> LocalBoxFuture<'a, Result<(), ModuleError>> {
            Box::pin(async move {
                state.started.lock().unwrap().push(self.name);
                match &self.behavior {
                    Behavior::Produce => {}
                    Behavior::Forget => return Ok(()),
                    Behavior::Fail(msg) => return Err(format!("{} broke: {msg}", self.name).into()),
                    Behavior::Handshake { tx, rx } => {
                        let tx = tx.lock().unwrap().take().ok_or("handshake reused")?;
                        let rx = rx.lock().unwrap().take().ok_or("handshake reused")?;
                        tx.send(()).map_err(|()| "partner gone")?;
                        rx.await?;
                    }
                }
                state.produced.lock().unwrap().extend(self.provides.iter().copied());
                Ok(())
            })
        }
    }

    fn module(
        name: &'static str,
        requires: &'static [Facility],
        provides: &'static [Facility],
    ) -> Box<dyn Module<TestState>> {
        with(name, requires, provides, Behavior::Produce)
    }

    fn with(
        name: &'static str,
        requires: &'static [Facility],
        provides: &'static [Facility],
        behavior: Behavior,
    ) -> Box<dyn Module<TestState>> {
        Box::new(TestModule {
            name,
            requires,
            provides,
            behavior,
        })
    }

    /// Runs a boot on a current-thread runtime, as on the actix System
    /// thread. The timeout turns a deadlock into a test failure.
    fn boot(graph: &ModuleGraph<TestState>, state: &TestState) -> Result<BootReport, BootError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(5), graph.run(state))
                    .await
                    .expect("boot deadlocked: inits of one layer did not run concurrently")
            })
    }

    fn build_err(modules: Vec<Box<dyn Module<TestState>>>) -> GraphError {
        match ModuleGraph::build(modules) {
            Ok(g) => panic!("expected a graph error, got {g:?}"),
            Err(e) => e,
        }
    }

    fn diamond() -> Vec<Box<dyn Module<TestState>>> {
        // Registered out of order on purpose: the plan must not depend on it.
        vec![
            module("agent", &[EVENT_BUS, REGISTRY], &[AGENT]),
            module("registry", &[CONFIG], &[REGISTRY]),
            module("config", &[], &[CONFIG]),
            module("bus", &[CONFIG], &[EVENT_BUS]),
        ]
    }

    #[test]
    fn modgraph_diamond_layers() {
        let graph = ModuleGraph::build(diamond()).unwrap();
        assert_eq!(
            graph.layers(),
            vec![vec!["config"], vec!["bus", "registry"], vec!["agent"]]
        );
        assert_eq!(graph.declared(), vec![AGENT, CONFIG, EVENT_BUS, REGISTRY]);
        assert_eq!(graph.provider_of(EVENT_BUS), Some("bus"));
        assert_eq!(graph.module_count(), 4);

        let state = TestState::default();
        let report = boot(&graph, &state).unwrap();
        assert_eq!(
            *state.started.lock().unwrap(),
            vec!["config", "bus", "registry", "agent"]
        );
        assert_eq!(state.produced.lock().unwrap().len(), 4);
        let timed: Vec<(&str, usize)> = report.modules.iter().map(|t| (t.name, t.layer)).collect();
        assert_eq!(timed, vec![("config", 0), ("bus", 1), ("registry", 1), ("agent", 2)]);
        assert_eq!(report.layers.len(), 3);
        assert!(report.duration_of("agent").is_some());
        assert!(report.duration_of("nope").is_none());
        assert!(report.not_produced.is_empty());
    }

    #[test]
    fn modgraph_layer_is_the_longest_path_not_the_registration_order() {
        // `late` needs config (layer 0) and agent (layer 2) -> layer 3.
        let mut modules = diamond();
        modules.push(module("late", &[CONFIG, AGENT], &[LLM]));
        let graph = ModuleGraph::build(modules).unwrap();
        assert_eq!(graph.layers()[3], vec!["late"]);
    }

    #[test]
    fn modgraph_inits_of_one_layer_run_concurrently() {
        // Each waits for the other's signal after sending its own. Run one
        // after the other, the first would wait forever.
        let (a_tx, a_rx) = oneshot::channel();
        let (b_tx, b_rx) = oneshot::channel();
        let graph = ModuleGraph::build(vec![
            with(
                "left",
                &[],
                &[EVENT_BUS],
                Behavior::Handshake {
                    tx: Mutex::new(Some(a_tx)),
                    rx: Mutex::new(Some(b_rx)),
                },
            ),
            with(
                "right",
                &[],
                &[REGISTRY],
                Behavior::Handshake {
                    tx: Mutex::new(Some(b_tx)),
                    rx: Mutex::new(Some(a_rx)),
                },
            ),
            module("after", &[EVENT_BUS, REGISTRY], &[AGENT]),
        ])
        .unwrap();
        assert_eq!(graph.layers(), vec![vec!["left", "right"], vec!["after"]]);

        let state = TestState::default();
        boot(&graph, &state).unwrap();
        assert!(state.produced(AGENT));
    }

    #[test]
    fn modgraph_missing_facility_lists_declared_and_all_unmet() {
        let err = build_err(vec![
            module("config", &[], &[CONFIG]),
            module("bus", &[CONFIG], &[EVENT_BUS]),
            module("agent", &["evnet-bus"], &[AGENT]),
            module("memory", &[CONFIG, "vector-store"], &[MEMORY]),
        ]);
        let text = err.to_string();
        match &err {
            GraphError::MissingFacility {
                module,
                facility,
                also_missing,
                declared,
            } => {
                assert_eq!((*module, *facility), ("agent", "evnet-bus"));
                assert_eq!(
                    also_missing,
                    &vec![Unmet {
                        module: "memory",
                        facility: "vector-store"
                    }]
                );
                assert_eq!(declared, &vec![AGENT, CONFIG, EVENT_BUS, MEMORY]);
            }
            other => panic!("wrong error: {other:?}"),
        }
        assert!(
            text.contains("Declared facilities: agent, config, event-bus, memory."),
            "{text}"
        );
        assert!(text.contains("did you mean `event-bus`?"), "{text}");
        assert!(text.contains("`memory` requires `vector-store`"), "{text}");
        assert!(text.contains("Next:"), "{text}");
    }

    #[test]
    fn modgraph_duplicate_provider() {
        let err = build_err(vec![
            module("config", &[], &[CONFIG]),
            module("bus-b", &[CONFIG], &[EVENT_BUS]),
            module("bus-a", &[CONFIG], &[EVENT_BUS, REGISTRY]),
        ]);
        let text = err.to_string();
        match err {
            GraphError::DuplicateProvider { facility, modules, .. } => {
                assert_eq!(facility, EVENT_BUS);
                assert_eq!(modules, vec!["bus-a", "bus-b"]);
            }
            other => panic!("wrong error: {other:?}"),
        }
        assert!(
            text.contains("Declared facilities: config, event-bus, registry."),
            "{text}"
        );
        assert!(text.contains("Next:"), "{text}");
    }

    #[test]
    fn modgraph_duplicate_module() {
        let err = build_err(vec![
            module("config", &[], &[CONFIG]),
            module("config", &[], &[EVENT_BUS]),
        ]);
        let text = err.to_string();
        assert!(
            matches!(
                err,
                GraphError::DuplicateModule {
                    module: "config",
                    count: 2,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(text.contains("Declared facilities: config, event-bus."), "{text}");
    }

    #[test]
    fn modgraph_three_cycle_is_named() {
        let err = build_err(vec![
            module("config", &[], &[CONFIG]),
            module("bus", &[CONFIG, AGENT], &[EVENT_BUS]),
            module("registry", &[EVENT_BUS], &[REGISTRY]),
            module("agent", &[REGISTRY], &[AGENT]),
            // Blocked by the cycle but not on it: must not be named.
            module("memory", &[AGENT], &[MEMORY]),
        ]);
        let text = err.to_string();
        match &err {
            GraphError::Cycle { modules, via, .. } => {
                assert_eq!(modules, &vec!["agent", "registry", "bus"]);
                assert_eq!(via, &vec![REGISTRY, EVENT_BUS, AGENT]);
            }
            other => panic!("wrong error: {other:?}"),
        }
        assert!(
            text.contains(
                "`agent` requires `registry` from `registry`, \
                 `registry` requires `event-bus` from `bus`, \
                 `bus` requires `agent` from `agent`"
            ),
            "{text}"
        );
        assert!(
            text.contains("Declared facilities: agent, config, event-bus, memory, registry."),
            "{text}"
        );
        assert!(!text.contains("`memory`"), "{text}");
    }

    #[test]
    fn modgraph_self_requirement_is_a_cycle() {
        let err = build_err(vec![module("loop", &[CONFIG], &[CONFIG])]);
        assert!(
            matches!(&err, GraphError::Cycle { modules, .. } if modules == &vec!["loop"]),
            "{err:?}"
        );
    }

    #[test]
    fn modgraph_declared_but_not_produced_fails_next_layer() {
        let graph = ModuleGraph::build(vec![
            module("config", &[], &[CONFIG]),
            with("bus", &[CONFIG], &[EVENT_BUS], Behavior::Forget),
            module("agent", &[EVENT_BUS], &[AGENT]),
        ])
        .unwrap();
        let state = TestState::default();
        let err = boot(&graph, &state).unwrap_err();
        let text = err.to_string();
        match err {
            BootError::NotProduced {
                layer,
                module,
                facility,
                provider,
            } => {
                assert_eq!((layer, module, facility, provider), (2, "agent", EVENT_BUS, "bus"));
            }
            other => panic!("wrong error: {other:?}"),
        }
        assert!(!state.started.lock().unwrap().contains(&"agent"));
        assert!(text.contains("Next:"), "{text}");
    }

    #[test]
    fn modgraph_unneeded_unproduced_facility_is_reported_not_fatal() {
        let graph = ModuleGraph::build(vec![
            module("config", &[], &[CONFIG]),
            with("llm", &[CONFIG], &[LLM], Behavior::Forget),
        ])
        .unwrap();
        let report = boot(&graph, &TestState::default()).unwrap();
        assert_eq!(report.not_produced, vec![("llm", LLM)]);
    }

    #[test]
    fn modgraph_init_error_stops_boot_and_names_module() {
        let graph = ModuleGraph::build(vec![
            module("config", &[], &[CONFIG]),
            with("registry", &[CONFIG], &[REGISTRY], Behavior::Fail("disk full")),
            module("bus", &[CONFIG], &[EVENT_BUS]),
            with("memory", &[CONFIG], &[MEMORY], Behavior::Fail("locked")),
            module("agent", &[EVENT_BUS], &[AGENT]),
        ])
        .unwrap();
        let state = TestState::default();
        let err = boot(&graph, &state).unwrap_err();
        let text = err.to_string();
        match &err {
            BootError::Init {
                layer,
                module,
                source,
                also_failed,
            } => {
                assert_eq!((*layer, *module), (1, "memory"));
                assert_eq!(source.to_string(), "memory broke: locked");
                let others: Vec<&str> = also_failed.iter().map(|(m, _)| *m).collect();
                assert_eq!(others, vec!["registry"]);
            }
            other => panic!("wrong error: {other:?}"),
        }
        assert!(std::error::Error::source(&err).is_some());
        assert!(text.contains("`registry`: registry broke: disk full"), "{text}");
        // The whole layer finished (bus ran), and the next layer never started.
        let started = state.started.lock().unwrap();
        assert!(started.contains(&"bus"));
        assert!(!started.contains(&"agent"));
    }

    #[test]
    fn modgraph_module_error_builds_from_errors_and_strings() {
        fn io() -> Result<(), ModuleError> {
            Err::<(), _>(std::io::Error::other("io failed"))?;
            Ok(())
        }
        assert_eq!(io().unwrap_err().to_string(), "io failed");
        let from_string: ModuleError = format!("port {}", 80).into();
        assert_eq!(from_string.to_string(), "port 80");
        let from_str: ModuleError = "plain".into();
        assert_eq!(from_str.to_string(), "plain");
    }

    #[test]
    fn modgraph_topology_format() {
        let graph = ModuleGraph::build(diamond()).unwrap();
        assert_eq!(
            graph.topology(),
            "layer 0  config\nlayer 1  bus, registry\nlayer 2  agent"
        );
        let empty = ModuleGraph::<TestState>::build(Vec::new()).unwrap();
        assert_eq!(empty.topology(), "");
        assert!(empty.layers().is_empty());
    }

    #[test]
    fn modgraph_suggestion_only_for_close_names() {
        let declared = [CONFIG, EVENT_BUS];
        assert_eq!(suggestion("confg", &declared), " (did you mean `config`?)");
        assert_eq!(suggestion("telemetry", &declared), "");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_slot_is_filled_once_and_names_its_facility_when_read_early() {
        let slot: Slot<u32> = Slot::new("memory");
        let err = slot.get().unwrap_err().to_string();
        assert!(err.contains("`memory`") && err.contains("requires()"), "{err}");
        assert!(!slot.is_provided());
        slot.provide(7).unwrap();
        assert_eq!(*slot.get().unwrap(), 7);
        assert!(matches!(slot.provide(8), Err(SlotError::Twice("memory"))));
        assert_eq!(*slot.get().unwrap(), 7, "the first value stays");
    }
}
