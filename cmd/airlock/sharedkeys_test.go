package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// serveRefused runs airlock serve on cfgFile and wants it to refuse to
// start, saying every one of want; it returns what it said.
func serveRefused(t *testing.T, cfgFile string, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewaytest.Binary(t, "airlock"), "serve", "--config", cfgFile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("airlock serve started (or hung) where it must refuse: %v\n%s", err, out.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("airlock serve refused without saying %q:\n%s", w, out.String())
		}
	}
	return out.String()
}

// withStorage adds a storage block on dsn to a configuration file.
func withStorage(t *testing.T, cfgFile, dsn string) {
	t.Helper()
	cfg, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, append(cfg, []byte("\nstorage {\n  postgres = \""+dsn+"\"\n  lease = \"3s\"\n}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The review's split: after storage migrate, a replica started before
// its keys were copied generated its own command MAC key and registered
// it, and the original gateway — whose key MACs the migrated log — was
// then refused. Now migrate records every key of the state directory;
// a replica without them, or with others, is refused, naming the
// fingerprint and the files to copy, and generates nothing; the original
// starts; a copy of its keys starts. The gateway CA is one too: ca init
// on a replica of a database that shares one is refused, and a replica
// with another CA does not start.
func TestReplicaKeysAreOneIdentity(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfgA, stateA := writeConfig(t, s, "run")
	if _, errs, code := runCLIEnv(t, map[string]string{"AIRLOCK_PASSWORD_FILE": writePW(t)}, "reviewer", "add", "alice", "--config", cfgA); code != 0 {
		t.Fatalf("reviewer add: %s", errs)
	}
	a := startDaemon(t, cfgA, stateA)
	a.signal(syscall.SIGTERM)

	dsn := pgtest.Shared(t).NewDatabase(t)
	out, errs, code := runCLIEnv(t, nil, "storage", "migrate", "--from", stateA, "--to", dsn)
	if code != 0 || !strings.Contains(out, "recorded the shared key command-hmac") || !strings.Contains(out, "recorded the shared key checkpoint") {
		t.Fatalf("storage migrate: exit %d: %s %s", code, out, errs)
	}
	keys, errs, code := runCLIEnv(t, nil, "storage", "keys", "--from", stateA, "--to", dsn)
	if code != 0 || !strings.Contains(keys, "records the keys of") {
		t.Errorf("storage keys again: exit %d: %s %s", code, keys, errs)
	}

	// B, its keys never copied: refused, nothing generated.
	cfgB, stateB := writeConfig(t, s, "run")
	withStorage(t, cfgB, dsn)
	serveRefused(t, cfgB, "the replicas share the key command-hmac (fingerprint", filepath.Join(stateB, "keys/command-hmac"), "never generate it here")
	if _, err := os.Stat(filepath.Join(stateB, "keys", "command-hmac")); !os.IsNotExist(err) {
		t.Fatalf("the refused replica made a command MAC key: %v", err)
	}
	// B with a key of its own: refused, naming both fingerprints.
	if err := os.MkdirAll(filepath.Join(stateB, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateB, "keys", "command-hmac"), []byte("c29tZSBvdGhlciBnYXRld2F5J3MgMzIgYnl0ZXMga2V5IQ==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serveRefused(t, cfgB, "this replica's key command-hmac (fingerprint", "is not the one the replicas share")

	// The original starts on the database: its key is the shared one.
	withStorage(t, cfgA, dsn)
	a.start()
	runApproved(t, a, "echo on postgres")

	// B with A's keys starts.
	os.RemoveAll(filepath.Join(stateB, "keys"))
	gatewaytest.CopyKeys(t, stateA, stateB)
	b := startDaemon(t, cfgB, stateB)

	// The CA: made on A, recorded; refused on B, which has none.
	if _, errs, code := runCLIEnv(t, nil, "ca", "init", "--config", cfgA); code != 0 {
		t.Fatalf("ca init on A: %s", errs)
	}
	if _, errs, code := runCLIEnv(t, nil, "ca", "init", "--config", cfgB); code == 0 || !strings.Contains(errs, "the replicas share a gateway CA (fingerprint SHA256:") {
		t.Errorf("ca init on B: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(stateB, "keys", "ca")); !os.IsNotExist(err) {
		t.Errorf("ca init on B made a CA: %v", err)
	}
	// B with a CA of its own does not start.
	b.signal(syscall.SIGTERM)
	if _, _, err := deploy.InitCA(filepath.Join(stateB, "keys", "ca")); err != nil {
		t.Fatal(err)
	}
	serveRefused(t, cfgB, "this replica's key ca (fingerprint SHA256:", "is not the one the replicas share")
	a.signal(syscall.SIGTERM)
}
