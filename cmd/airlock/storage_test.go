package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// A SQLite gateway with a few thousand audit entries moves to PostgreSQL:
// the log is verified before and after, its export is the same byte for
// byte from either, the reviewers and the state come along, and the
// gateway runs on the database with the same state directory's keys.
func TestStorageMigrateFromSQLite(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfgFile, state := writeConfig(t, s, "call")
	if _, errs, code := runCLIEnv(t, map[string]string{"AIRLOCK_PASSWORD_FILE": writePW(t)}, "reviewer", "add", "alice", "--config", cfgFile); code != 0 {
		t.Fatalf("reviewer add: %s", errs)
	}
	d := startDaemon(t, cfgFile, state)
	runApproved(t, d, "echo before")
	d.signal(syscall.SIGTERM)

	// Thousands of entries more, in the gateway's own log and key.
	l, err := auditchain.Open(context.Background(), auditchain.DefaultOptions(state))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		if _, err := l.Append(context.Background(), auditchain.Entry{Kind: auditchain.KindActionRequested, ActionID: fmt.Sprintf("act_bulk%04d", i),
			Fields: []auditchain.Field{auditchain.Str("command", "uptime"), auditchain.Int("i", int64(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	exportBefore, errs, code := runCLIEnv(t, nil, "audit", "export", "--db", filepath.Join(state, "audit.db"))
	if code != 0 {
		t.Fatalf("export before: %s", errs)
	}

	dsn := pgtest.Shared(t).NewDatabase(t)
	// A running gateway is refused.
	d.start()
	if _, errs, code := runCLIEnv(t, nil, "storage", "migrate", "--from", state, "--to", dsn); code == 0 || !strings.Contains(errs, "stop it first") {
		t.Errorf("migrating a running gateway: %d %s", code, errs)
	}
	d.signal(syscall.SIGTERM)
	exportBefore, _, _ = runCLIEnv(t, nil, "audit", "export", "--db", filepath.Join(state, "audit.db"))

	out, errs, code := runCLIEnv(t, nil, "storage", "migrate", "--from", state, "--to", dsn)
	if code != 0 {
		t.Fatalf("storage migrate: %d %s %s", code, out, errs)
	}
	for _, want := range []string{"verified", "copied the audit log", "verified again", "1 reviewer,", "schema up to date"} {
		if !strings.Contains(out, want) {
			t.Errorf("storage migrate said %q, want %q in it", out, want)
		}
	}
	vkey := filepath.Join(state, "keys", "checkpoint.vkey")
	if out, errs, code := runCLIEnv(t, nil, "audit", "verify", "--db", dsn, "--key", vkey); code != 0 || !strings.HasPrefix(out, "intact") {
		t.Fatalf("verify on PostgreSQL: %d %s %s", code, out, errs)
	}
	exportAfter, errs, code := runCLIEnv(t, nil, "audit", "export", "--db", dsn, "--key", vkey)
	if code != 0 || exportAfter != exportBefore || strings.Count(exportAfter, "\n") < 3000 {
		t.Fatalf("export from PostgreSQL (%d lines, exit %d, %s) differs from SQLite's (%d lines)", strings.Count(exportAfter, "\n"), code, errs, strings.Count(exportBefore, "\n"))
	}
	// A second move into the same database is refused, nothing changed.
	if _, errs, code := runCLIEnv(t, nil, "storage", "migrate", "--from", state, "--to", dsn); code == 0 || !strings.Contains(errs, "already holds") {
		t.Errorf("a second move: %d %s", code, errs)
	}

	// The gateway on the database: the reviewer moved with it.
	cfg, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, append(cfg, []byte("\nstorage {\n  postgres = \""+dsn+"\"\n}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	runApproved(t, d, "echo after")
	d.signal(syscall.SIGTERM)
	for _, f := range []string{"--db", "--config"} {
		arg := dsn
		if f == "--config" {
			arg = cfgFile
		}
		if out, errs, code := runCLIEnv(t, nil, "audit", "verify", f, arg, "--key", vkey); code != 0 || !strings.HasPrefix(out, "intact") {
			t.Errorf("verify with %s after the gateway ran on PostgreSQL: %d %s %s", f, code, out, errs)
		}
	}
	if !bytes.HasPrefix([]byte(mustExport(t, dsn, vkey)), []byte(exportBefore)) {
		t.Error("the log on PostgreSQL does not extend the migrated one")
	}
}

func mustExport(t *testing.T, db, vkey string) string {
	t.Helper()
	out, errs, code := runCLIEnv(t, nil, "audit", "export", "--db", db, "--key", vkey)
	if code != 0 {
		t.Fatalf("export: %s", errs)
	}
	return out
}

// runApproved runs command on box through d as an agent and approves it.
func runApproved(t *testing.T, d *daemon, command string) {
	t.Helper()
	var out bytes.Buffer
	a := d.agent("airlock-ssh box " + command)
	a.Stdout, a.Stderr = &out, &out
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	list := d.pending(1)
	if _, errs, code := d.cli("approvals", "approve", list[0].ID); code != 0 {
		t.Fatalf("approve: %s", errs)
	}
	if err := a.Wait(); err != nil || !strings.Contains(out.String(), strings.TrimPrefix(command, "echo ")) {
		t.Fatalf("agent: %v %q", err, out.String())
	}
}
