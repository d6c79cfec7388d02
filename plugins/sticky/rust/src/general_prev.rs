//! Kafka's prevAssignment for the general builder (general_prev.go).

use crate::claims::{cooperative_user_data_generation, BeReader, DEFAULT_GENERATION};
use crate::group::Group;

impl<'a> Group<'a> {
    /// Returns Kafka's prevAssignment for the general builder, per global
    /// partition: of the members that claim it in a generation below the
    /// newest any member reports, the one with the highest such generation
    /// (the first in member order on ties), or -1. It returns None when no
    /// partition has one, which is the usual case: every member reports the
    /// same generation. Only holder's length is used.
    ///
    /// Which claims count depends on the assignor (Group::cooperative):
    /// owned partitions for cooperative-sticky, user data for sticky.
    pub(crate) fn previous_generation(&mut self, holder: &[i32]) -> Option<Vec<i32>> {
        let req = self.req;
        let cooperative = self.cooperative;
        // Kafka's maxGeneration counts members that own nothing too.
        let mut newest = DEFAULT_GENERATION;
        for mem in &req.members {
            let gen = if !cooperative {
                sticky_user_data_generation(&mem.user_data)
            } else if mem.owned_generation >= 0 {
                mem.owned_generation
            } else {
                cooperative_user_data_generation(&mem.user_data)
            };
            newest = newest.max(gen);
        }
        let claims = self.claims(cooperative);
        for c in &claims {
            newest = newest.max(c.gen);
        }
        let mut prev: Vec<i32> = Vec::new();
        let mut gen: Vec<i32> = Vec::new();
        for c in &claims {
            if c.gen >= newest {
                continue;
            }
            if prev.is_empty() {
                prev = vec![-1; holder.len()];
                gen = vec![0; holder.len()];
            }
            let stride = c.stride();
            for k in 0..c.n {
                let x = (c.start + k * stride) as usize;
                let p = prev[x];
                if p < 0 || c.gen > gen[x] || (c.gen == gen[x] && self.rank[c.member as usize] < self.rank[p as usize]) {
                    prev[x] = c.member;
                    gen[x] = c.gen;
                }
            }
        }
        if prev.is_empty() {
            None
        } else {
            Some(prev)
        }
    }
}

/// Returns the generation of StickyAssignor user data: the int32 after
/// the assignment array in v1, and -1 for v0, for user data that does not
/// decode, or for none (see append_sticky_user_data for the layout).
pub(crate) fn sticky_user_data_generation(ud: &[u8]) -> i32 {
    let mut r = BeReader::new(ud);
    let topics = r.count();
    let mut i = 0;
    while i < topics && r.ok {
        r.str();
        let k = r.count();
        if r.need(4 * k as u64) {
            r.off += 4 * k;
        }
        i += 1;
    }
    if !r.ok || ud.len() - r.off < 4 {
        return DEFAULT_GENERATION;
    }
    i32::from_be_bytes([ud[r.off], ud[r.off + 1], ud[r.off + 2], ud[r.off + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// StickyAssignor user data: [topic: string16, partitions: [int32]]
    /// then, in v1, the generation.
    fn sticky_user_data(owned: &[(&str, &[i32])], gen: i32, v1: bool) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(owned.len() as i32).to_be_bytes());
        for (t, ps) in owned {
            b.extend_from_slice(&(t.len() as i16).to_be_bytes());
            b.extend_from_slice(t.as_bytes());
            b.extend_from_slice(&(ps.len() as i32).to_be_bytes());
            for p in ps.iter() {
                b.extend_from_slice(&p.to_be_bytes());
            }
        }
        if v1 {
            b.extend_from_slice(&gen.to_be_bytes());
        }
        b
    }

    /// The generation Kafka's maxGeneration takes from StickyAssignor user
    /// data.
    #[test]
    fn sticky_user_data_generation_reads_v1_and_treats_the_rest_as_none() {
        let t03: &[i32] = &[0, 3];
        let one: &[i32] = &[1];
        let zero: &[i32] = &[0];
        let tests: Vec<(&str, Vec<u8>, i32)> = vec![
            ("none", Vec::new(), -1),
            ("v1 with partitions", sticky_user_data(&[("t", t03), ("u", one)], 7, true), 7),
            ("v1 owning nothing", sticky_user_data(&[], 9, true), 9),
            ("v0", sticky_user_data(&[("t", zero)], 7, false), -1),
            ("truncated", sticky_user_data(&[("t", zero)], 7, true)[..9].to_vec(), -1),
            ("negative array length", (-1i32).to_be_bytes().to_vec(), -1),
            ("huge partition count", {
                let mut b = sticky_user_data(&[("t", zero)], 7, true);
                b[7..11].copy_from_slice(&i32::MAX.to_be_bytes());
                b
            }, -1),
        ];
        for (name, ud, want) in tests {
            assert_eq!(sticky_user_data_generation(&ud), want, "{}", name);
        }
    }
}
