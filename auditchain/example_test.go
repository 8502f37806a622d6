package auditchain_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/airlockgw/airlock/auditchain"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "auditchain-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The contract's layout: audit.db, keys/checkpoint.key (generated,
	// owner-only), keys/checkpoint.vkey, checkpoints.log.
	opts := auditchain.DefaultOptions(dir)
	opts.Origin = "example.test/airlock"
	clock := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	opts.Now = func() time.Time { clock = clock.Add(time.Second); return clock }

	l, err := auditchain.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	// The gateway's crash recovery: actions that connected and never finished.
	dangling, err := l.Dangling(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dangling:", len(dangling))

	// Append returns once the entry is durable.
	ref, err := l.Append(ctx, auditchain.Entry{
		Kind:     auditchain.KindActionConnecting,
		ActionID: "act-1",
		RunID:    "run-1",
		Fields:   []auditchain.Field{auditchain.Str("target", "build-box"), auditchain.Str("account", "deploy")},
	})
	if err != nil {
		log.Fatal(err) // the gateway fails closed: nothing is dialed
	}
	fmt.Println("connecting at seq", ref.Seq)
	if _, err := l.Append(ctx, auditchain.Entry{
		Kind:     auditchain.KindActionFinished,
		ActionID: "act-1",
		RunID:    "run-1",
		Fields:   []auditchain.Field{auditchain.Str("outcome", "exited"), auditchain.Int("exit_code", 0)},
	}); err != nil {
		log.Fatal(err)
	}
	// Close signs a final checkpoint over everything.
	if err := l.Close(ctx); err != nil {
		log.Fatal(err)
	}

	// An investigator verifies with the verifier key and the checkpoints
	// kept outside the database.
	key, err := auditchain.ReadVerifierKey(opts.VerifierKeyPath)
	if err != nil {
		log.Fatal(err)
	}
	trusted, err := auditchain.ReadTrustedNotes(opts.CheckpointLogPath)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := auditchain.Verify(ctx, auditchain.VerifyOptions{Path: opts.Path, Key: key, Trusted: trusted})
	if err != nil {
		log.Fatal(err) // could not verify
	}
	fmt.Println("intact:", rep.Intact(), "entries:", rep.Entries, "uncovered:", rep.Uncovered)
	// Output:
	// dangling: 0
	// connecting at seq 0
	// intact: true entries: 2 uncovered: 0
}
