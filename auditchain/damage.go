package auditchain

import "fmt"

// DamageKind classifies what Verify found wrong. The set is closed and its
// names are printed by the CLI and in JSON reports: append new kinds at the
// end, never rename or reorder them.
type DamageKind uint8

const (
	damageInvalid DamageKind = iota
	// DamageModified: an entry's bytes, or a stored hash derived from them,
	// differ from what the chain and the tree say.
	DamageModified
	// DamageDeleted: entries are missing before the end of the log.
	DamageDeleted
	// DamageInserted: an entry that was never appended sits among them.
	DamageInserted
	// DamageReordered: genuine entries sit at the wrong positions.
	DamageReordered
	// DamageDuplicated: a genuine entry appears a second time.
	DamageDuplicated
	// DamageTruncated: the database's own checkpoints or stored tree
	// vouch for entries at the end that are gone.
	DamageTruncated
	// DamageRolledBack: the database is internally consistent, but a
	// checkpoint kept outside it vouches for entries it does not hold (an
	// older copy was restored, or its tail was cut together with the
	// evidence inside it).
	DamageRolledBack
	// DamageFork: a validly signed checkpoint vouches for a different
	// history than the database holds.
	DamageFork
	// DamageBadSignature: a checkpoint's signature by the verifier key does
	// not verify (its text or signature was changed).
	DamageBadSignature
	// DamageUnknownKey: a checkpoint is not signed by the verifier key.
	DamageUnknownKey
	// DamageWrongOrigin: a checkpoint is validly signed but names another
	// log.
	DamageWrongOrigin
	// DamageCheckpointDeleted: the chain records a checkpoint that the
	// database no longer stores.
	DamageCheckpointDeleted
	// DamageCheckpointOrder: checkpoint sizes go backwards, or two
	// checkpoints of one size disagree.
	DamageCheckpointOrder
	// DamageReplayed: an earlier checkpoint was stored again later.
	DamageReplayed
	// DamageMalformed: a row or a note is not well formed (NULLs, wrong
	// column types, unparseable checkpoint).
	DamageMalformed
	// DamageSchema: tables, indexes or triggers differ from what the log
	// creates (for example the append-only triggers were dropped).
	DamageSchema
	damageEnd // keep last
)

var damageNames = [...]string{
	damageInvalid:           "",
	DamageModified:          "modified",
	DamageDeleted:           "deleted",
	DamageInserted:          "inserted",
	DamageReordered:         "reordered",
	DamageDuplicated:        "duplicated",
	DamageTruncated:         "truncated",
	DamageRolledBack:        "rolled_back",
	DamageFork:              "fork",
	DamageBadSignature:      "bad_signature",
	DamageUnknownKey:        "unknown_key",
	DamageWrongOrigin:       "wrong_origin",
	DamageCheckpointDeleted: "checkpoint_deleted",
	DamageCheckpointOrder:   "checkpoint_order",
	DamageReplayed:          "replayed",
	DamageMalformed:         "malformed",
	DamageSchema:            "schema",
}

// String returns the kind's name.
func (k DamageKind) String() string {
	if k <= damageInvalid || k >= damageEnd {
		return fmt.Sprintf("DamageKind(%d)", uint8(k))
	}
	return damageNames[k]
}

// MarshalText returns the kind's name.
func (k DamageKind) MarshalText() ([]byte, error) {
	if k <= damageInvalid || k >= damageEnd {
		return nil, fmt.Errorf("audit log: invalid damage kind %d", uint8(k))
	}
	return []byte(damageNames[k]), nil
}

// UnmarshalText parses a name with ParseDamageKind.
func (k *DamageKind) UnmarshalText(b []byte) error {
	v, err := ParseDamageKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// ParseDamageKind returns the kind with the given name.
func ParseDamageKind(s string) (DamageKind, error) {
	for k := damageInvalid + 1; k < damageEnd; k++ {
		if damageNames[k] == s {
			return k, nil
		}
	}
	return damageInvalid, fmt.Errorf("audit log: unknown damage kind %q", s)
}

func (p CheckpointProblem) damage() DamageKind {
	switch p {
	case CheckpointBadSignature:
		return DamageBadSignature
	case CheckpointUnknownKey:
		return DamageUnknownKey
	case CheckpointWrongOrigin:
		return DamageWrongOrigin
	default:
		return DamageMalformed
	}
}
