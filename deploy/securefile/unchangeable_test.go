package securefile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// CheckUnchangeable refuses a file the account could change or replace,
// wherever above the file the way in lies: the file, its directory, any
// directory above (renaming one replaces everything below it), and the
// directories above the file a link names.
func TestCheckUnchangeable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another account")
	}
	const account = 4242
	tests := []struct {
		name  string
		setup func(t *testing.T, top, dir, file string) string // returns the path to check
		at    string                                           // "file", "dir", "top", "real", "": accepted
		want  Problem
	}{
		{"root's file in root's directories", func(t *testing.T, top, dir, file string) string { return file }, "", 0},
		{"the file is the account's", func(t *testing.T, top, dir, file string) string { os.Chown(file, account, account); return file }, "file", WrongOwner},
		{"its directory is the account's", func(t *testing.T, top, dir, file string) string { os.Chown(dir, account, account); return file }, "dir", WrongOwner},
		{"a directory above is the account's", func(t *testing.T, top, dir, file string) string { os.Chown(top, account, account); return file }, "top", WrongOwner},
		{"the file is group-writable", func(t *testing.T, top, dir, file string) string { os.Chmod(file, 0o664); return file }, "file", WritableByOthers},
		{"the file is world-writable, even sticky", func(t *testing.T, top, dir, file string) string { os.Chmod(file, os.ModeSticky|0o666); return file }, "file", WritableByOthers},
		{"a directory above is group-writable", func(t *testing.T, top, dir, file string) string { os.Chmod(top, 0o775); return file }, "top", WritableByOthers},
		{"a sticky world-writable directory above", func(t *testing.T, top, dir, file string) string { os.Chmod(top, os.ModeSticky|0o777); return file }, "", 0},
		{"a link to a file in the account's directory", func(t *testing.T, top, dir, file string) string {
			theirs := filepath.Join(top, "theirs")
			os.Mkdir(theirs, 0o755)
			real := filepath.Join(theirs, "policy")
			os.WriteFile(real, []byte("x"), 0o644)
			os.Chown(theirs, account, account)
			link := filepath.Join(dir, "link")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "real", WrongOwner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := filepath.Join(t.TempDir(), "top")
			dir := filepath.Join(top, "dir")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chmod(top, 0o755)
			file := filepath.Join(dir, "policy")
			if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := CheckUnchangeable(tt.setup(t, top, dir, file), account)
			if tt.at == "" {
				if err != nil {
					t.Fatalf("CheckUnchangeable: %v, want it accepted", err)
				}
				return
			}
			want := map[string]string{"file": file, "dir": dir, "top": top, "real": filepath.Join(top, "theirs")}[tt.at]
			var e *Error
			if !errors.As(err, &e) || e.Problem != tt.want || e.Path != want {
				t.Fatalf("CheckUnchangeable: %v, want %v at %s", err, tt.want, want)
			}
		})
	}
	// The kernel follows a link before "..": dir/link/../policy opens the
	// policy beside the link's target, not dir's. The guard must judge the
	// file that is opened, or refuse.
	t.Run("a link followed by ..", func(t *testing.T) {
		base := t.TempDir()
		theirs := filepath.Join(base, "theirs")
		sub := filepath.Join(theirs, "sub")
		os.MkdirAll(sub, 0o755)
		os.WriteFile(filepath.Join(theirs, "policy"), []byte("the account's"), 0o644)
		os.Chown(theirs, account, account)
		ours := filepath.Join(base, "ours")
		os.Mkdir(ours, 0o755)
		os.WriteFile(filepath.Join(ours, "policy"), []byte("root's"), 0o644)
		if err := os.Symlink(sub, filepath.Join(ours, "link")); err != nil {
			t.Fatal(err)
		}
		tricky := ours + "/link/../policy"
		if b, _ := os.ReadFile(tricky); string(b) != "the account's" {
			t.Fatalf("opening %s read %q; the test's premise does not hold", tricky, b)
		}
		if err := CheckUnchangeable(tricky, account); err == nil {
			t.Error("CheckUnchangeable passed a path that opens the account's file")
		}
	})
	t.Run("root may own everything", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "policy")
		os.WriteFile(file, []byte("x"), 0o644)
		if err := CheckUnchangeable(file, 0); err != nil {
			t.Errorf("CheckUnchangeable for root: %v", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if err := CheckUnchangeable(filepath.Join(t.TempDir(), "missing"), account); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("CheckUnchangeable of a missing file: %v, want not-exist", err)
		}
	})
}
