package auditchain

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// level is a closed set stored by name, as outcomes are.
type level uint8

func (l level) MarshalText() ([]byte, error) {
	switch l {
	case 1:
		return []byte("low"), nil
	case 2:
		return []byte("high"), nil
	}
	return nil, errors.New("invalid level")
}

func (l *level) UnmarshalText(b []byte) error {
	switch string(b) {
	case "low":
		*l = 1
	case "high":
		*l = 2
	default:
		return errors.New("unknown level")
	}
	return nil
}

type common struct {
	Host string `audit:"host"`
}

type extra struct {
	Signal string `audit:"signal,omitempty"`
	Core   *bool  `audit:"core_dumped"`
}

type sample struct {
	Common   common    `audit:",inline"`
	Extra    *extra    `audit:",inline"`
	PID      int64     `audit:"pid"`
	Count    int       `audit:"count,omitempty"`
	Serial   uint64    `audit:"serial,omitempty"`
	Note     string    `audit:"note,omitempty"`
	Late     bool      `audit:"late,omitempty"`
	Code     *int64    `audit:"exit_code"`
	Level    level     `audit:"level,omitempty"`
	Expires  time.Time `audit:"expires_at,omitempty"`
	Raw      []byte    `audit:"raw,omitempty"`
	Digest   [32]byte  `audit:"digest,omitempty"`
	Out      Blob      `audit:"stdout,omitempty"`
	Err      *Blob     `audit:"stderr"`
	internal string
}

func TestRecordFields(t *testing.T) {
	zero := int64(0)
	at := time.Date(2026, 12, 1, 8, 0, 0, 500, time.FixedZone("x", 3600))
	tests := []struct {
		name string
		rec  sample
		want []Field
	}{
		{"empty values: only what is always present", sample{}, []Field{Str("host", ""), Int("pid", 0)}},
		{"a nil pointer is absent, a zero one present", sample{PID: 7, Code: &zero}, []Field{Str("host", ""), Int("pid", 7), Int("exit_code", 0)}},
		{"every kind of value", sample{
			Common: common{Host: "h"}, PID: 1, Count: 2, Serial: 3, Note: "n", Late: true, Level: 2, Expires: at,
			Raw: []byte{1, 2}, Digest: [32]byte{9},
		}, []Field{
			Str("host", "h"), Int("pid", 1), Int("count", 2), Int("serial", 3), Str("note", "n"), Bool("late", true),
			Str("level", "high"), Str("expires_at", "2026-12-01T07:00:00Z"), Bytes("raw", []byte{1, 2}), Bytes("digest", (&[32]byte{9})[:]),
		}},
		{"an embedded pointer is flattened when set", sample{Extra: &extra{Core: new(bool)}}, []Field{
			Str("host", ""), Bool("core_dumped", false), Int("pid", 0),
		}},
		{"groups are prefixed", sample{Out: Blob{Size: 4}, Err: &Blob{}}, []Field{
			Str("host", ""), Int("pid", 0),
			Bytes("stdout_sha256", make([]byte, 32)), Int("stdout_bytes", 4), Int("stdout_stored", 0), Bool("stdout_truncated", false),
			Bytes("stderr_sha256", make([]byte, 32)), Int("stderr_bytes", 0), Int("stderr_stored", 0), Bool("stderr_truncated", false),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FieldsOf(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
			// What is written reads back as it was (times to the second,
			// in UTC).
			e := Entry{Fields: got}
			var back sample
			if err := e.Decode(&back); err != nil {
				t.Fatal(err)
			}
			want := tt.rec
			if !want.Expires.IsZero() {
				want.Expires = want.Expires.UTC().Truncate(time.Second)
			}
			if diff := cmp.Diff(want, back, cmp.AllowUnexported(sample{})); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordDecodeRefusesWrongValues(t *testing.T) {
	tests := []struct {
		name  string
		field Field
	}{
		{"int for a string", Int("host", 1)},
		{"string for an int", Str("pid", "1")},
		{"unknown text", Str("level", "medium")},
		{"short digest", Bytes("digest", []byte{1})},
		{"not a time", Str("expires_at", "tomorrow")},
		{"string in a group", Str("stdout_bytes", "4")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Entry{Fields: []Field{tt.field}}
			var rec sample
			err := e.Decode(&rec)
			if err == nil || !strings.Contains(err.Error(), tt.field.Name) {
				t.Errorf("Decode: %v, want an error naming %s", err, tt.field.Name)
			}
		})
	}
}

func TestRecordRefusesTypesItCannotHold(t *testing.T) {
	tests := []struct {
		name string
		rec  any
	}{
		{"not a struct", 3},
		{"float", struct {
			X float64 `audit:"x"`
		}{}},
		{"map", struct {
			X map[string]string `audit:"x"`
		}{}},
		{"bad name", struct {
			X string `audit:"Bad-Name"`
		}{}},
		{"inline non-struct", struct {
			X string `audit:",inline"`
		}{}},
		{"tagged but unexported", struct {
			x string `audit:"x"`
		}{}},
		{"bad option", struct {
			X string `audit:"x,sometimes"`
		}{}},
		{"value that cannot be written", struct {
			L level `audit:"level"`
		}{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f, err := FieldsOf(tt.rec); err == nil {
				t.Errorf("FieldsOf = %v, want an error", f)
			}
		})
	}
}

func TestRecordAppends(t *testing.T) {
	// A record's fields are what Append takes: names valid, values typed.
	o := testOptions(t)
	l := openLog(t, o)
	f, err := FieldsOf(sample{PID: 1, Out: Blob{Size: 1}, Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(t.Context(), Entry{Kind: KindGatewayStarted, Fields: f}); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
}
