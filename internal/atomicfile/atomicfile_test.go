package atomicfile_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/latscope/latscope/internal/atomicfile"
)

// names lists dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// assertOnly fails unless dir holds exactly want.
func assertOnly(t *testing.T, dir string, want ...string) {
	t.Helper()
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, want %q", dir, got, want)
	}
}

func assertContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s holds %q, want %q", filepath.Base(path), got, want)
	}
}

// umasked is the mode the kernel gives a file created with perm here: perm
// less this process's umask, found without changing it.
func umasked(t *testing.T, perm fs.FileMode) fs.FileMode {
	t.Helper()
	ref := filepath.Join(t.TempDir(), "reference")
	f, err := os.OpenFile(ref, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	info, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func TestWriteFileCommitsWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "report.html")
	if err := atomicfile.WriteFile(target, []byte("<p>whole</p>"), atomicfile.Options{}); err != nil {
		t.Fatal(err)
	}
	assertContent(t, target, "<p>whole</p>")
	assertOnly(t, dir, "report.html")
	if got, want := mode(t, target), umasked(t, 0o644); got != want {
		t.Errorf("mode %v, want %v (0644 less the umask)", got, want)
	}
	secret := filepath.Join(dir, "secret.lsr")
	if err := atomicfile.WriteFile(secret, nil, atomicfile.Options{Perm: 0o600}); err != nil {
		t.Fatal(err)
	}
	if got, want := mode(t, secret), umasked(t, 0o600); got != want {
		t.Errorf("mode with Perm 0600: %v, want %v", got, want)
	}
}

func TestCreateWritesUnderAHiddenNameUntilCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "x.csv")
	f, err := atomicfile.Create(target, atomicfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	if _, err := io.WriteString(f, "a,b\n"); err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(f.Name()) != dir || !strings.HasPrefix(filepath.Base(f.Name()), ".x.csv.") || f.Target() != target {
		t.Errorf("Name %q, Target %q: want a hidden name beside %q", f.Name(), f.Target(), target)
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the target exists before Commit: %v", err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	assertContent(t, target, "a,b\n")
	assertOnly(t, dir, "x.csv")
	if err := f.Commit(); err != nil {
		t.Errorf("a second Commit: %v", err)
	}
	if err := f.Abort(); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	assertContent(t, target, "a,b\n")
	if _, err := f.Write([]byte("more")); err == nil || !strings.Contains(err.Error(), "already committed") {
		t.Errorf("Write after Commit: %v, want an error", err)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := atomicfile.Create(filepath.Join(dir, "x.md"), atomicfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "half")
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, dir)
	if err := f.Commit(); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("Commit after Abort: %v, want an error", err)
	}
}

func TestExistingTargetIsKeptUnlessOverwriting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "x.json")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(target, 0o640) // a mode the umask cannot have made
	err := atomicfile.WriteFile(target, []byte("new"), atomicfile.Options{})
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "allow overwriting") {
		t.Fatalf("WriteFile over an existing file: %v, want fs.ErrExist saying how to allow it", err)
	}
	assertContent(t, target, "old")
	assertOnly(t, dir, "x.json")

	if err := atomicfile.WriteFile(target, []byte("new"), atomicfile.Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	assertContent(t, target, "new")
	assertOnly(t, dir, "x.json")
	if got := mode(t, target); got != 0o640 {
		t.Errorf("the replaced file's mode is %v, want its old 0640 kept", got)
	}
}

// TestCreatedMeanwhileIsNotReplaced: without Overwrite, a file that
// appears at the target while the new one is written wins.
func TestCreatedMeanwhileIsNotReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "x.csv")
	f, err := atomicfile.Create(target, atomicfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "mine")
	if err := os.WriteFile(target, []byte("theirs"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Commit over a file created meanwhile: %v, want fs.ErrExist", err)
	}
	assertContent(t, target, "theirs")
	assertOnly(t, dir, "x.csv")
}

// TestSymlinkIsNeverReplacedNorFollowed: a link at the target, there
// before Create, dangling, or planted before Commit, is refused, and
// neither it nor the file it points to changes.
func TestSymlinkIsNeverReplacedNorFollowed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "report.html")
	dangling := filepath.Join(dir, "dangling.html")
	for _, l := range [][2]string{{victim, link}, {filepath.Join(dir, "nowhere"), dangling}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range []string{link, dangling} {
		for _, overwrite := range []bool{false, true} {
			err := atomicfile.WriteFile(target, []byte("evil"), atomicfile.Options{Overwrite: overwrite})
			if !errors.Is(err, atomicfile.ErrSymlink) {
				t.Errorf("WriteFile(%s, overwrite %v): %v, want ErrSymlink", filepath.Base(target), overwrite, err)
			}
			if _, err := atomicfile.CreateStream(target, atomicfile.Options{Overwrite: overwrite}); !errors.Is(err, atomicfile.ErrSymlink) {
				t.Errorf("CreateStream(%s, overwrite %v): %v, want ErrSymlink", filepath.Base(target), overwrite, err)
			}
		}
	}
	planted := filepath.Join(dir, "planted.html")
	f, err := atomicfile.Create(planted, atomicfile.Options{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "evil")
	if err := os.Symlink(victim, planted); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); !errors.Is(err, atomicfile.ErrSymlink) {
		t.Errorf("Commit over a link planted after Create: %v, want ErrSymlink", err)
	}
	assertContent(t, victim, "precious")
	for _, l := range []string{link, dangling, planted} {
		if info, err := os.Lstat(l); err != nil || info.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v", filepath.Base(l), err)
		}
	}
	assertOnly(t, dir, "dangling.html", "planted.html", "report.html", "victim")
}

// TestOnlyRegularFilesAreReplaced: a directory, a FIFO or a device is
// refused at once, even with Overwrite (opening a FIFO to write would
// block; renaming over /dev/null would replace it).
func TestOnlyRegularFilesAreReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{fifo, sub, os.DevNull} {
		err := atomicfile.WriteFile(target, []byte("x"), atomicfile.Options{Overwrite: true})
		if !errors.Is(err, atomicfile.ErrNotRegular) {
			t.Errorf("WriteFile(%s): %v, want ErrNotRegular", target, err)
		}
	}
	assertOnly(t, dir, "fifo", "sub")
	if info, err := os.Lstat(os.DevNull); err != nil || info.Mode().IsRegular() {
		t.Fatalf("%s: %v, %v", os.DevNull, info, err)
	}
}

// TestFailedWriteLeavesNothing: a disk that fills mid-write (injected: a
// real full disk is in the acceptance tier) leaves the old file as it was
// and no temporary file; the error names the target and keeps the
// system's reason.
func TestFailedWriteLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "x.html")
	if err := os.WriteFile(target, []byte("old report"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "x.csv")
	for _, tc := range []struct {
		target    string
		overwrite bool
	}{{target, true}, {fresh, false}} {
		f, err := atomicfile.Create(tc.target, atomicfile.Options{Overwrite: tc.overwrite})
		if err != nil {
			t.Fatal(err)
		}
		atomicfile.FailWrites(f, 4096, syscall.ENOSPC)
		n, err := f.Write(bytes.Repeat([]byte("x"), 10000))
		if n != 4096 || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Write: %d, %v; want 4096 bytes and ENOSPC", n, err)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != tc.target || pe.Err != syscall.ENOSPC {
			t.Errorf("Write's error %#v: want a *fs.PathError naming %s with the system's reason", err, tc.target)
		}
		if _, err := f.Write([]byte("y")); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("a write after the failure: %v, want the failure again", err)
		}
		err = f.Commit()
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "nothing written to "+tc.target) {
			t.Errorf("Commit after a failed write: %v, want ENOSPC and nothing written", err)
		}
	}
	assertContent(t, target, "old report")
	assertOnly(t, dir, "x.html")
}

func TestWriteFuncLeavesNothingOnItsError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "x.md")
	boom := errors.New("template failed")
	err := atomicfile.WriteFunc(target, atomicfile.Options{}, func(w io.Writer) error {
		io.WriteString(w, "# half a report")
		return boom
	})
	if err != boom {
		t.Fatalf("WriteFunc: %v, want the writer's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		atomicfile.WriteFunc(target, atomicfile.Options{}, func(w io.Writer) error {
			io.WriteString(w, "# half a report")
			panic("writer panicked")
		})
	}()
	assertOnly(t, dir)
}

func TestMissingDirectory(t *testing.T) {
	t.Parallel()
	target := filepath.Join(t.TempDir(), "no", "such", "x.csv")
	err := atomicfile.WriteFile(target, []byte("x"), atomicfile.Options{})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), target) {
		t.Fatalf("WriteFile into a missing directory: %v, want ErrNotExist naming %s", err, target)
	}
}

// TestLongName: a name near the file system's limit still gets a
// temporary name that fits.
func TestLongName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := strings.Repeat("r", 250) + ".csv"
	if err := atomicfile.WriteFile(filepath.Join(dir, name), []byte("x"), atomicfile.Options{}); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, dir, name)
}
