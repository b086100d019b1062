//! What the two sides said in their handshakes and negotiated, and the plan made of it: read
//! by every message without a lock, changed only when the client initializes and when a link
//! is adopted.
//!
//! Changes are made under the session's state lock (each takes the guard as proof), so they
//! never race one another, and a reader that holds that lock sees them stay as they are
//! beside what else the lock keeps (the tools a listing learned under a link's version).

use super::plan::{ClientSide, Plan, UpstreamSide};
use super::state::SessionState;
use crate::config::UpstreamConfig;
use crate::mcp::ProtocolVersion;
use arc_swap::{ArcSwap, Guard};
use serde_json::Value;
use std::sync::{Arc, MutexGuard};

/// The client's and the upstream's handshakes, and the plan, as one value.
#[derive(Clone, Debug, Default)]
pub(super) struct Sides {
    /// The client's `initialize` params, from the moment it arrives (its capabilities are
    /// declared to every link).
    pub(super) init_params: Option<Arc<Value>>,
    /// The client's version, once its `initialize` has been answered.
    pub(super) version: Option<ProtocolVersion>,
    /// The version the client's `initialize` is to be answered at, from the moment it
    /// arrives: what the upstream sends while the handshake runs is translated for it.
    pub(super) asked: Option<ProtocolVersion>,
    /// The version the current link negotiated (`None` while a new link negotiates).
    pub(super) upstream_version: Option<ProtocolVersion>,
    /// What the session decided when its current link negotiated (see `plan`).
    pub(super) plan: Option<Plan>,
    /// The upstream's capabilities, from its `initialize` result (an object, without `tasks`
    /// when its version has none: a server that leaks them is not run as a task server).
    pub(super) caps: Arc<Value>,
    /// The upstream's `initialize` result as the link negotiated it (what `server/discover`
    /// tells a modern client).
    pub(super) init: Arc<Value>,
}

impl Sides {
    /// The capabilities the client's `initialize` declared.
    pub(super) fn client_capabilities(&self) -> Option<&Value> {
        super::reach::declared(self.init_params.as_deref())
    }

    /// The client's version from the moment its `initialize` arrives.
    pub(super) fn client_version(&self) -> Option<ProtocolVersion> {
        self.version.or(self.asked)
    }

    /// The upstream's version, the newest the gateway offers until a link has negotiated.
    pub(super) fn upstream_version(&self) -> ProtocolVersion {
        self.upstream_version.unwrap_or(ProtocolVersion::LATEST)
    }

    /// (client, upstream) versions, from the moment the client's `initialize` arrives.
    pub(super) fn versions(&self) -> Option<(ProtocolVersion, ProtocolVersion)> {
        Some((self.client_version()?, self.upstream_version()))
    }

    /// The client's era: `modern` (a 2026-07-28 request's session), or legacy at its version.
    pub(super) fn client_side(&self, modern: bool) -> ClientSide {
        match modern {
            true => ClientSide::Modern,
            false => ClientSide::Legacy(self.client_version().unwrap_or(ProtocolVersion::LATEST)),
        }
    }

    /// The plan; before any link negotiated, one for an upstream of the newest legacy
    /// version that declared nothing (as the session takes it to be until then).
    pub(super) fn plan(&self, modern: bool, config: &UpstreamConfig, shared: bool) -> Plan {
        self.plan.unwrap_or_else(|| {
            let upstream = UpstreamSide::Legacy(self.upstream_version());
            Plan::new(self.client_side(modern), upstream, &self.caps, config, (shared, false))
        })
    }
}

/// The session's [`Sides`]: a read takes no lock (and is to be let go at once).
pub(super) struct SidesCell(ArcSwap<Sides>);

impl SidesCell {
    pub(super) fn new(sides: Sides) -> SidesCell {
        SidesCell(ArcSwap::from_pointee(sides))
    }

    pub(super) fn now(&self) -> Guard<Arc<Sides>> {
        self.0.load()
    }

    /// Changes them by `f`, with the session's state lock held (`_held`: its guard), which
    /// keeps changes in order.
    pub(super) fn change(&self, _held: &MutexGuard<'_, SessionState>, f: impl FnOnce(&mut Sides)) {
        let mut sides = Sides::clone(&self.now());
        f(&mut sides);
        self.0.store(Arc::new(sides));
    }
}
