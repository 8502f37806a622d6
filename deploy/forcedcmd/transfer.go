package forcedcmd

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/policy"
)

// serveTransfer runs a built-in put or get and fills in rec: exit 0 when
// the file moved whole, ExitRefused (with rec.Reason) when it did not.
// A put writes a temporary file in the destination directory (0600,
// never through a link), checks the bytes' size and SHA-256 against the
// request's, syncs it, gives it its mode and only then its name: by a
// hard link, which never replaces anything, or with overwrite by a
// rename. A get reads a regular file, never through a link at its name.
func serveTransfer(tr *policy.TransferRequest, t *policy.Transfer, o Options, rec *Record) {
	start := time.Now()
	rec.Decision, rec.Command = Allow, ""
	var err error
	if tr.Put {
		// A session that ends mid-put makes sshd signal us: keep going,
		// so that the read from standard input ends (its pipe closes)
		// and the temporary file is removed, never published.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(sigs)
		rec.Verb, rec.Args = "put", []string{tr.Path, fmt.Sprintf("%04o", tr.Mode), strconv.FormatInt(tr.Size, 10), hex.EncodeToString(tr.SHA256[:])}
		if tr.Overwrite {
			rec.Args = append(rec.Args, "overwrite")
		}
		err = putFile(tr, o.Stdin)
	} else {
		rec.Verb, rec.Args = "get", []string{tr.Path}
		err = getFile(tr.Path, t.MaxSize, o.Stdout)
	}
	rec.Duration = time.Since(start)
	if err != nil {
		rec.Exit, rec.Reason = ExitRefused, oneLine(err)
		fmt.Fprintf(o.Stderr, "airlock-action: %s %s: %s\n", rec.Verb, tr.Path, rec.Reason)
		return
	}
	rec.Exit = 0
}

// putFile writes tr's file from in (see serveTransfer).
func putFile(tr *policy.TransferRequest, in io.Reader) error {
	if in == nil {
		in = eofReader{}
	}
	if st, err := os.Lstat(tr.Path); err == nil {
		switch {
		case !tr.Overwrite:
			return errors.New("it exists; it is replaced only with overwrite")
		case !st.Mode().IsRegular() && st.Mode()&os.ModeSymlink == 0:
			return errors.New("it exists and is not a regular file")
		}
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	tmp := filepath.Join(filepath.Dir(tr.Path), ".airlock-"+hex.EncodeToString(nonce[:])+".part")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	published := false
	defer func() {
		if !published {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(in, tr.Size+1))
	switch {
	case err != nil:
		return fmt.Errorf("reading the file: %w", err)
	case n != tr.Size:
		return fmt.Errorf("%d bytes arrived, not %d; nothing was published", n, tr.Size)
	case [32]byte(h.Sum(nil)) != tr.SHA256:
		return errors.New("the bytes do not have the SHA-256 asked for; nothing was published")
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Chmod(os.FileMode(tr.Mode)); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if tr.Overwrite {
		err = os.Rename(tmp, tr.Path)
	} else if err = os.Link(tmp, tr.Path); err == nil {
		os.Remove(tmp)
	}
	if err != nil {
		return fmt.Errorf("publishing: %w; nothing was published", err)
	}
	published = true
	return nil
}

// getFile writes the regular file path, at most max bytes, to out.
func getFile(path string, max int64, out io.Writer) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return errors.New("not a regular file")
	case st.Size() > max:
		return fmt.Errorf("%d bytes, over the transfer's max_size of %d", st.Size(), max)
	}
	n, err := io.Copy(out, io.LimitReader(f, max+1))
	switch {
	case err != nil:
		return err
	case n > max:
		return fmt.Errorf("it grew past the transfer's max_size of %d while it was read", max)
	}
	return nil
}

// eofReader reads nothing.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
