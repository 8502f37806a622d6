package engine

import "testing"

// The reference digest is the one most live replicas hold; on a tie there
// is none. Replicas whose lease ran out do not count.
func TestDriftReference(t *testing.T) {
	live := func(d string) ReplicaStatus { return ReplicaStatus{ConfigDigest: d, LeaseLeft: 3} }
	dead := func(d string) ReplicaStatus { return ReplicaStatus{ConfigDigest: d, LeaseLeft: -1} }
	for _, c := range []struct {
		name    string
		rs      []ReplicaStatus
		want    string
		wantTie bool
	}{
		{"none", nil, "", false},
		{"one", []ReplicaStatus{live("a")}, "a", false},
		{"all agree", []ReplicaStatus{live("a"), live("a"), live("a")}, "a", false},
		{"a majority", []ReplicaStatus{live("b"), live("a"), live("a")}, "a", false},
		{"a plurality", []ReplicaStatus{live("a"), live("a"), live("b"), live("c")}, "a", false},
		{"two that differ", []ReplicaStatus{live("a"), live("b")}, "", true},
		{"a tie among the most held", []ReplicaStatus{live("a"), live("b"), live("b"), live("a"), live("c")}, "", true},
		{"the dead do not count", []ReplicaStatus{dead("b"), dead("b"), live("a")}, "a", false},
		{"no digest recorded counts as one", []ReplicaStatus{live(""), live(""), live("a")}, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range 20 { // map order must not matter
				got, tie := reference(c.rs)
				if got != c.want || tie != c.wantTie {
					t.Fatalf("reference = %q, tie %v; want %q, tie %v", got, tie, c.want, c.wantTie)
				}
			}
		})
	}
}
