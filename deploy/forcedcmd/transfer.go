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
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy/policy"
)

// serveTransfer runs a built-in put or get and fills in rec: exit 0 when
// the file moved whole, ExitRefused (with rec.Reason) when it did not.
// Every name beneath the put_under or get_under directory is opened from
// that directory's descriptor, following no link (openBeneath): what was
// checked is what is used, whatever renames race it. A put writes a
// temporary file in the destination directory (0600), checks the bytes'
// size and SHA-256 against the request's, syncs it, gives it its mode and
// only then its name, relative to the directory's descriptor: by a hard
// link, which never replaces anything, or with overwrite by a rename; then
// syncs the directory. A get reads a regular file.
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
		err = errOutside
		if root, ok := rootOf(tr.Path, t.PutUnder); ok {
			err = putFile(tr, root, o.Stdin)
		}
	} else {
		rec.Verb, rec.Args = "get", []string{tr.Path}
		err = errOutside
		if root, ok := rootOf(tr.Path, t.GetUnder); ok {
			err = getFile(tr.Path, root, t.MaxSize, o.Stdout)
		}
	}
	rec.Duration = time.Since(start)
	if err != nil {
		rec.Exit, rec.Reason = ExitRefused, oneLine(err)
		fmt.Fprintf(o.Stderr, "airlock-action: %s %s: %s\n", rec.Verb, tr.Path, rec.Reason)
		return
	}
	rec.Exit = 0
}

// putFile writes tr's file from in beneath the put_under directory root
// (see serveTransfer): every name is resolved from root's descriptor
// (openBeneath), and the temporary file is created, published and
// removed relative to its directory's descriptor.
func putFile(tr *policy.TransferRequest, root string, in io.Reader) error {
	if in == nil {
		in = eofReader{}
	}
	dir, name, err := openParent(root, tr.Path)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFLNK:
			return errors.New("it exists and is not a regular file")
		case !tr.Overwrite:
			// The gateway (sshexec) knows the refusal by these words.
			return errors.New("it exists; it is replaced only with overwrite")
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("checking it: %w", err)
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	tmp := ".airlock-" + hex.EncodeToString(nonce[:]) + ".part"
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("creating a temporary file: %w", err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(filepath.Dir(tr.Path), tmp))
	published := false
	defer func() {
		if !published {
			f.Close()
			unix.Unlinkat(dir, tmp, 0)
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
		err = unix.Renameat(dir, tmp, dir, name)
	} else if err = unix.Linkat(dir, tmp, dir, name, 0); err == nil {
		unix.Unlinkat(dir, tmp, 0)
	}
	if err != nil {
		return fmt.Errorf("publishing: %w; nothing was published", err)
	}
	published = true
	// The new name is on disk before the put says it is done.
	if err := unix.Fsync(dir); err != nil {
		return fmt.Errorf("the file was published, but its directory could not be synced: %w", err)
	}
	return nil
}

// openParent opens the directory path is to be written in, beneath root,
// and returns its descriptor and the name path takes in it.
func openParent(root, path string) (int, string, error) {
	rootFD, err := openRoot(root)
	if err != nil {
		return -1, "", err
	}
	rel := strings.TrimPrefix(path, root+"/")
	parent, name := filepath.Split(rel)
	if parent == "" {
		return rootFD, name, nil
	}
	defer unix.Close(rootFD)
	dir, err := openBeneath(rootFD, strings.TrimSuffix(parent, "/"), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", fmt.Errorf("opening its directory: %w", err)
	}
	return dir, name, nil
}

// getFile writes the regular file path beneath the get_under directory
// root, at most max bytes, to out; path is opened from root's descriptor
// (openBeneath).
func getFile(path, root string, max int64, out io.Writer) error {
	rootFD, err := openRoot(root)
	if err != nil {
		return err
	}
	fd, err := openBeneath(rootFD, strings.TrimPrefix(path, root+"/"), unix.O_RDONLY|unix.O_NONBLOCK)
	unix.Close(rootFD)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), path)
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
