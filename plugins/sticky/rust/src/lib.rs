// Conventions of the port, so that each file reads next to its Go twin:
// Go identifiers in snake_case, Go types in CamelCase, methods on *group as
// `impl<'a> Group<'a>` methods with the same parameter order; Go int32 stays
// i32, Go int used as a length or index is usize. `BeReader::need` takes a
// u64 (write `r.need(4 * k as u64)`: 4*k overflows usize on wasm32).
// Request topic indices are u32, and `TopicPartitions::list` marks what Go
// writes as a negative topic (a topic-list reference).
//
// Performance notes: wasm loops are slower than native ones (in the
// in-process fallback every loop header even exits to the host's deadline
// check; BENCHMARKS.md, "Where a call's time goes"), and rustc 1.63's wasm
// std copies and compares byte by byte, so hot loops are unrolled, short
// byte strings are compared without memcmp, and .cargo/config.toml enables
// bulk memory (memcpy as one instruction).

//! Kafka's StickyAssignor and CooperativeStickyAssignor as one wasmassign
//! plugin: the Rust port of package plugins/sticky, which stays the readable
//! reference. The port follows the Go package function for function (same
//! runs, same dealing, same tie-breaks), so that both give the same
//! assignment for every request; a differential test holds them to it.

mod claims;
mod general;
mod general_order;
mod general_prev;
mod group;
mod groupview;
mod output;
mod rack;
mod uniform;

#[cfg(test)]
mod tests;

use wasmassign::{Request, Response};

use crate::claims::Claim;
use crate::group::Group;

/// The eager assignor's name, which is also the Kafka protocol it answers for.
pub const STICKY_NAME: &str = "sticky";
/// The cooperative assignor's name and protocol.
pub const COOPERATIVE_NAME: &str = "cooperative-sticky";

/// Computes Kafka's StickyAssignor assignment for req, with previous
/// ownership read from each member's sticky user data (or, when no member
/// sends any, from the host's previous assignment). Every member gets one
/// assignment, in request order, carrying v1 sticky user data.
pub fn assign_sticky(req: &Request) -> Result<Response, String> {
    assign(req, false)
}

/// Computes Kafka's CooperativeStickyAssignor target assignment for req,
/// with previous ownership taken from owned partitions (or, when no member
/// reports any, from the host's previous assignment).
pub fn assign_cooperative(req: &Request) -> Result<Response, String> {
    assign(req, true)
}

fn assign(req: &Request, cooperative: bool) -> Result<Response, String> {
    let name = if cooperative { COOPERATIVE_NAME } else { STICKY_NAME };
    let mut g = match Group::new(req) {
        Ok(g) => g,
        Err(e) => return Err(format!("{}: {}", name, e)),
    };
    g.cooperative = cooperative;
    let claims = g.claims(cooperative);
    let mut kept = g.settle(claims);
    let mut rk = rack::new_racks(&g);
    if rk.is_some() && !uniform::all_contiguous(&kept) {
        // Rack mode looks at every partition's replicas anyway.
        kept = g.unstride(&kept);
    }
    let runs: Vec<Claim> = if g.uniform {
        let order = g.order.clone();
        let ranks = g.all_ranks();
        g.assign_uniform(&order, &ranks, kept, rk.as_mut())
    } else {
        g.assign_general(&kept, rk.as_ref())
    };
    Ok(g.response(&runs, !cooperative, req.generation))
}

wasmassign::plugin! {
    wasmassign::Assignor {
        name: STICKY_NAME,
        version: "1.0.0",
        protocols: &[STICKY_NAME],
        modes: wasmassign::Modes::BOTH,
        may_leave_unassigned: false,
        grouped: true,
        description: "Kafka's StickyAssignor: balanced, keeps what members owned (from sticky user data), rack-aware per KIP-881",
        assign: assign_sticky,
    },
    wasmassign::Assignor {
        name: COOPERATIVE_NAME,
        version: "1.0.0",
        protocols: &[COOPERATIVE_NAME],
        modes: wasmassign::Modes::BOTH,
        may_leave_unassigned: false,
        grouped: true,
        description: "Kafka's CooperativeStickyAssignor: balanced, keeps owned partitions, rack-aware per KIP-881",
        assign: assign_cooperative,
    },
}
