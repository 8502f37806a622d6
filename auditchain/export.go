package auditchain

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// MarshalJSON renders a record as one line of the export (JSON Lines):
//
//	{"seq":0,"time":"…","kind":"action.requested","action_id":"…","run_id":"…",
//	 "fields":{"name":value,…},"leaf":"<base64>","leaf_hash":"<hex>","chain_hash":"<hex>"}
//
// Field values: strings as JSON strings (invalid UTF-8 is replaced, so a
// string may not round-trip), int64 as numbers, bools, bytes as hex. The
// JSON is for people and tools; leaf holds the exact bytes that are
// hashed, from which everything else can be re-derived and checked.
func (r Record) MarshalJSON() ([]byte, error) {
	fields := make(map[string]any, len(r.Fields))
	for _, f := range r.Fields {
		switch v := f.Value.(type) {
		case []byte:
			fields[f.Name] = hex.EncodeToString(v)
		default:
			fields[f.Name] = v
		}
	}
	kind, err := r.Kind.MarshalText()
	if err != nil {
		return nil, fmt.Errorf("auditchain: export entry %d: %w", r.Seq, err)
	}
	return json.Marshal(struct {
		Seq       int64          `json:"seq"`
		Time      string         `json:"time"`
		Kind      string         `json:"kind"`
		ActionID  string         `json:"action_id,omitempty"`
		RunID     string         `json:"run_id,omitempty"`
		Fields    map[string]any `json:"fields"`
		Leaf      string         `json:"leaf"`
		LeafHash  string         `json:"leaf_hash"`
		ChainHash string         `json:"chain_hash"`
	}{
		Seq:       r.Seq,
		Time:      r.Time.UTC().Format(jsonTime),
		Kind:      string(kind),
		ActionID:  r.ActionID,
		RunID:     r.RunID,
		Fields:    fields,
		Leaf:      base64.StdEncoding.EncodeToString(r.Leaf),
		LeafHash:  hex.EncodeToString(r.LeafHash[:]),
		ChainHash: hex.EncodeToString(r.Chain[:]),
	})
}
