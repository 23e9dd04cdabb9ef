package sshserve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The host key is made where the user says when there is none (0600),
// and read again, the same key, at the next start.
func TestTheHostKeyIsMadeOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	_, line := clientKey(t)
	keys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keys, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{AuthorizedKeys: keys, HostKey: filepath.Join(dir, "host_key"), Feed: frameFeed()}
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(cfg.HostKey)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 || !first.NewKey {
		t.Fatalf("host key made with mode %04o (new %v), want 0600", perm, first.NewKey)
	}
	second, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if second.NewKey || second.Fingerprint() != first.Fingerprint() || !strings.HasPrefix(first.Fingerprint(), "SHA256:") {
		t.Fatalf("second start: new %v, fingerprint %s, want the first's %s", second.NewKey, second.Fingerprint(), first.Fingerprint())
	}
}

// Files that cannot be used are refused at start, each saying why.
func TestUnusableKeyFilesAreRefused(t *testing.T) {
	_, line := clientKey(t)
	for _, c := range []struct {
		name, keys, hostKey string
		hostMode            os.FileMode
		want                string
	}{
		{"no keys", "# nobody yet\n\n", "", 0, "no public key in it"},
		{"not a key", "ssh-ed25519 not-base64!\n", "", 0, "line 1"},
		{"key options", `from="10.0.0.0/8" ` + line, "", 0, "key options"},
		{"open host key", line, "-----BEGIN OPENSSH PRIVATE KEY-----\n", 0o644, "too open"},
		{"bad host key", line, "not a key\n", 0o600, "--ssh-host-key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{AuthorizedKeys: filepath.Join(dir, "keys"), HostKey: filepath.Join(dir, "host_key"), Feed: frameFeed()}
			if err := os.WriteFile(cfg.AuthorizedKeys, []byte(c.keys), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.hostKey != "" {
				if err := os.WriteFile(cfg.HostKey, []byte(c.hostKey), c.hostMode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(cfg.HostKey, c.hostMode); err != nil {
					t.Fatal(err)
				}
			}
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an error saying %q", err, c.want)
			}
		})
	}
	if _, err := New(Config{HostKey: "k", Feed: frameFeed()}); err == nil || !strings.Contains(err.Error(), "--ssh-authorized-keys") {
		t.Fatalf("without authorized keys: %v", err)
	}
	if _, err := New(Config{AuthorizedKeys: "/nonexistent/keys", HostKey: "k", Feed: frameFeed()}); err == nil || !strings.Contains(err.Error(), "/nonexistent/keys") {
		t.Fatalf("missing authorized keys: %v", err)
	}
}
