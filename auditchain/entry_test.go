package auditchain

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)

func TestLeafGolden(t *testing.T) {
	e := Entry{
		Seq:      7,
		Time:     time.Unix(0, 0x0102030405060708).UTC(),
		Kind:     KindRunEnded,
		ActionID: "a",
		RunID:    "rn",
		Fields:   []Field{Int("n", -1), Bool("b", true), Str("s", "x"), Bytes("d", []byte{0xff})},
	}
	got, err := EncodeLeaf(e)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := bytes.Join([][]byte{
		{0x01},
		{0, 0, 0, 0, 0, 0, 0, 7},
		{1, 2, 3, 4, 5, 6, 7, 8},
		{9}, []byte("run.ended"),
		{0, 1}, []byte("a"),
		{0, 2}, []byte("rn"),
		{0, 4}, // four fields, sorted by name: b, d, n, s
		{1}, []byte("b"), {tagBool}, {1},
		{1}, []byte("d"), {tagBytes}, {0, 0, 0, 1}, {0xff},
		{1}, []byte("n"), {tagInt}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{1}, []byte("s"), {tagString}, {0, 0, 0, 1}, []byte("x"),
	}, nil)
	if !bytes.Equal(got, wantBytes) {
		t.Errorf("leaf\n got %x\nwant %x", got, wantBytes)
	}
}

func TestLeafRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		e    Entry
	}{
		{"no fields", Entry{Seq: 0, Time: t0, Kind: KindGatewayStarted}},
		{"every type", Entry{Seq: 42, Time: t0, Kind: KindActionFinished, ActionID: "act", RunID: "run",
			Fields: []Field{Str("outcome", "exited"), Int("exit_code", 0), Bool("truncated", false), Bytes("stdout_sha256", bytes.Repeat([]byte{7}, 32))}}},
		{"invalid UTF-8 kept", Entry{Seq: 1, Time: t0, Kind: KindActionRequested, ActionID: "\xff\xfe", Fields: []Field{Str("command", "echo \xc3\x28")}}},
		{"NFC", Entry{Seq: 1, Time: t0, Kind: KindActionRequested, Fields: []Field{Str("command", "caf\u00e9")}}},
		{"NFD", Entry{Seq: 1, Time: t0, Kind: KindActionRequested, Fields: []Field{Str("command", "cafe\u0301")}}},
		{"control and bidi characters", Entry{Seq: 1, Time: t0, Kind: KindActionRequested, Fields: []Field{Str("command", "rm \u202e\x00\n-rf")}}},
		{"extreme ints", Entry{Seq: 1<<62 - 1, Time: time.Unix(0, -1).UTC(), Kind: KindCheckpoint, Fields: []Field{Int("max", 1<<63-1), Int("min", -1<<63)}}},
		{"empty values", Entry{Seq: 3, Time: t0, Kind: KindOutputRead, Fields: []Field{Str("s", ""), Bytes("b", []byte{})}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaf, err := EncodeLeaf(tt.e)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeLeaf(leaf)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.e
			want.Fields, _ = want.normalize()
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			again, err := EncodeLeaf(got)
			if err != nil || !bytes.Equal(again, leaf) {
				t.Errorf("re-encoding differs: %x vs %x (%v)", again, leaf, err)
			}
		})
	}
}

// Entries that differ in any way must have different leaves.
func TestLeafUnambiguous(t *testing.T) {
	pairs := []struct {
		name string
		a, b Entry
	}{
		{"length prefix of fields", Entry{Kind: KindActionRequested, Fields: []Field{Str("a", "ab"), Str("b", "c")}},
			Entry{Kind: KindActionRequested, Fields: []Field{Str("a", "a"), Str("b", "bc")}}},
		{"length prefix of ids", Entry{Kind: KindActionRequested, ActionID: "ab", RunID: "c"},
			Entry{Kind: KindActionRequested, ActionID: "a", RunID: "bc"}},
		{"id vs field", Entry{Kind: KindActionRequested, ActionID: "x"},
			Entry{Kind: KindActionRequested, Fields: []Field{Str("x", "")}}},
		{"NFC vs NFD", Entry{Kind: KindActionRequested, Fields: []Field{Str("c", "\u00e9")}},
			Entry{Kind: KindActionRequested, Fields: []Field{Str("c", "e\u0301")}}},
		{"string vs bytes", Entry{Kind: KindActionRequested, Fields: []Field{Str("c", "x")}},
			Entry{Kind: KindActionRequested, Fields: []Field{Bytes("c", []byte("x"))}}},
		{"bool vs int", Entry{Kind: KindActionRequested, Fields: []Field{Bool("c", true)}},
			Entry{Kind: KindActionRequested, Fields: []Field{Int("c", 1)}}},
		{"invalid UTF-8 vs replacement", Entry{Kind: KindActionRequested, Fields: []Field{Str("c", "\xff")}},
			Entry{Kind: KindActionRequested, Fields: []Field{Str("c", "\ufffd")}}},
		{"kind", Entry{Kind: KindRunApproved}, Entry{Kind: KindRunDenied}},
		{"seq", Entry{Seq: 1, Kind: KindRunApproved}, Entry{Seq: 2, Kind: KindRunApproved}},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			p.a.Time, p.b.Time = t0, t0
			la, err := EncodeLeaf(p.a)
			if err != nil {
				t.Fatal(err)
			}
			lb, err := EncodeLeaf(p.b)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(la, lb) {
				t.Errorf("distinct entries share the leaf %x", la)
			}
		})
	}
}

func TestLeafFieldOrderIrrelevant(t *testing.T) {
	a := Entry{Time: t0, Kind: KindRunCreated, Fields: []Field{Str("z", "1"), Int("a", 2), Bool("m", true)}}
	b := Entry{Time: t0, Kind: KindRunCreated, Fields: []Field{Bool("m", true), Str("z", "1"), Int("a", 2)}}
	la, _ := EncodeLeaf(a)
	lb, _ := EncodeLeaf(b)
	if !bytes.Equal(la, lb) {
		t.Error("field order changed the leaf")
	}
}

func TestEncodeLeafRejects(t *testing.T) {
	tests := []struct {
		name string
		e    Entry
	}{
		{"invalid kind", Entry{Kind: Kind(0)}},
		{"kind out of range", Entry{Kind: kindEnd}},
		{"duplicate field", Entry{Kind: KindRunCreated, Fields: []Field{Str("a", "1"), Int("a", 2)}}},
		{"empty field name", Entry{Kind: KindRunCreated, Fields: []Field{Str("", "1")}}},
		{"upper-case field name", Entry{Kind: KindRunCreated, Fields: []Field{Str("Target", "1")}}},
		{"field name with space", Entry{Kind: KindRunCreated, Fields: []Field{Str("a b", "1")}}},
		{"long field name", Entry{Kind: KindRunCreated, Fields: []Field{Str(string(bytes.Repeat([]byte("a"), MaxFieldName+1)), "1")}}},
		{"unsupported type int", Entry{Kind: KindRunCreated, Fields: []Field{{Name: "n", Value: 1}}}},
		{"unsupported type float", Entry{Kind: KindRunCreated, Fields: []Field{{Name: "n", Value: 1.5}}}},
		{"nil value", Entry{Kind: KindRunCreated, Fields: []Field{{Name: "n"}}}},
		{"long id", Entry{Kind: KindRunCreated, ActionID: string(bytes.Repeat([]byte("a"), MaxIDLen+1))}},
		{"long value", Entry{Kind: KindRunCreated, Fields: []Field{Str("s", string(make([]byte, MaxValueLen+1)))}}},
		{"negative seq", Entry{Seq: -1, Kind: KindRunCreated}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := EncodeLeaf(tt.e); !errors.Is(err, ErrInvalidEntry) {
				t.Errorf("EncodeLeaf: %v, want ErrInvalidEntry", err)
			}
		})
	}
}

func TestDecodeLeafRejects(t *testing.T) {
	good, err := EncodeLeaf(Entry{Seq: 1, Time: t0, Kind: KindRunCreated, Fields: []Field{Bool("a", true), Str("b", "x")}})
	if err != nil {
		t.Fatal(err)
	}
	// Offsets in good: header 17, kind 1+11, ids 2+2, count 2 = 35;
	// field a: 1+1+1+1 at 35..38 (bool value at 38); field b from 39.
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name string
		leaf []byte
	}{
		{"empty", nil},
		{"version 2", edit(func(b []byte) []byte { b[0] = 2; return b })},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", append(bytes.Clone(good), 0)},
		{"unknown kind", edit(func(b []byte) []byte { b[18] = 'X'; return b })},
		{"bool 2", edit(func(b []byte) []byte { b[38] = 2; return b })},
		{"unknown tag", edit(func(b []byte) []byte { b[37] = 9; return b })},
		{"unsorted fields", edit(func(b []byte) []byte { b[36] = 'c'; return b })},
		{"duplicate fields", edit(func(b []byte) []byte { b[36] = 'b'; return b })},
		{"bad field name", edit(func(b []byte) []byte { b[36] = 'A'; return b })},
		{"seq over int64", edit(func(b []byte) []byte { b[1] = 0x80; return b })},
		{"huge string length", edit(func(b []byte) []byte { b[42] = 0x7f; return b })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeLeaf(tt.leaf); !errors.Is(err, ErrMalformedLeaf) {
				t.Errorf("DecodeLeaf: %v, want ErrMalformedLeaf", err)
			}
		})
	}
}

func TestKindNames(t *testing.T) {
	want := []string{"gateway.started", "gateway.stopped", "config.loaded", "run.created", "run.approved",
		"run.denied", "run.ended", "action.requested", "approval.requested", "approval.decided",
		"action.connecting", "action.finished", "output.read", "token.rotated", "checkpoint", "auth.failed",
		"agent.added", "agent.revoked", "reviewer.added", "reviewer.disabled", "reviewer.enabled", "reviewer.removed",
		"reviewer.password_changed", "command.revealed", "reviewer.renamed", "reviewer.sessions_ended", "reviewer.link_issued"}
	var got []string
	for k := kindInvalid + 1; k < kindEnd; k++ {
		got = append(got, k.String())
		b, err := k.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Kind
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("UnmarshalText(%q) = %v, %v", b, back, err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "Checkpoint", "action.finished ", "run"} {
		if _, err := ParseKind(bad); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("ParseKind(%q): %v, want ErrInvalidEntry", bad, err)
		}
	}
	if _, err := Kind(0).MarshalText(); err == nil {
		t.Error("MarshalText of the zero kind succeeded")
	}
}
