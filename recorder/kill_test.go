//go:build unix

package recorder

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

const helperEnv = "LATSCOPE_RECORDER_HELPER_FILE"

// TestKilledWriterLeavesAReadableFile records in a child process, kills it
// with SIGKILL while a frame is half written, and reads what it left.
func TestKilledWriterLeavesAReadableFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "killed.jsonl.zst")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	stdin, err := cmd.StdinPipe() // held open: the child waits on it until killed
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var tornAt int64
	var written int
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if _, scanErr := fmt.Sscanf(line, "torn %d %d", &tornAt, &written); err != nil || scanErr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper said %q (%v, %v)", line, err, scanErr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want killed by SIGKILL", err)
	}

	// A killed run leaves its recording under the partial name.
	r, err := Open(path + ".partial")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
		n++
	}
	var torn *TornTailError
	if !errors.As(err, &torn) || torn.Offset != tornAt {
		t.Fatalf("after %d events: got %v, want a torn tail at offset %d", n, err, tornAt)
	}
	if n != written {
		t.Errorf("read %d events, want the %d of the complete frames", n, written)
	}
}

// TestHelperProcess is the child of TestKilledWriterLeavesAReadableFile.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("runs only as a child of TestKilledWriterLeavesAReadableFile")
	}
	w, err := Create(path, testHeader(), Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	evs := everyKind(t0)
	for _, ev := range evs {
		_ = w.Write(ev)
		_ = w.Flush()
	}
	tornAt := w.Stats().Bytes
	for _, ev := range evs {
		_ = w.Write(ev)
	}
	if err := w.writeHalfAFrame(); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("torn %d %d\n", tornAt, 1+len(evs))
	// Wait to be killed; stdin closes (and this returns) only if the parent
	// died first.
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(1)
}

// writeHalfAFrame writes the first half of the open frame, as a write cut
// short by the process's death would.
func (w *Writer) writeHalfAFrame() error {
	frame := w.zenc.EncodeAll(w.lines.Bytes(), nil)
	_, err := w.file.Write(frame[:len(frame)/2])
	return err
}
