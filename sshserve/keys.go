package sshserve

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/latscope/latscope/internal/fileread"
)

// maxKeyFileBytes bounds an authorized_keys or host key file.
const maxKeyFileBytes = fileread.MiB

// readAuthorizedKeys reads an OpenSSH authorized_keys file: one public key
// a line, with its options and comment; blank lines and # comments are
// skipped. Options (from=, command=, ...) are refused rather than ignored:
// a key the file restricts must not get in unrestricted.
func readAuthorizedKeys(path string) ([]ssh.PublicKey, error) {
	data, err := readKeyFile(path, "--ssh-authorized-keys", "a list of public keys")
	if err != nil {
		return nil, err
	}
	var keys []ssh.PublicKey
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		key, _, options, _, err := gossh.ParseAuthorizedKey(line)
		if err != nil {
			return nil, fmt.Errorf("--ssh-authorized-keys %s line %d: %w", path, n+1, err)
		}
		if len(options) > 0 {
			return nil, fmt.Errorf("--ssh-authorized-keys %s line %d: key options (%s) are not supported: give the key alone", path, n+1, strings.Join(options, ","))
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("--ssh-authorized-keys %s: no public key in it (one a line, as in ~/.ssh/authorized_keys)", path)
	}
	return keys, nil
}

// hostSigner reads the server's private key from path, or, when there is
// no file there, makes an Ed25519 key and writes it (mode 0600, never over
// an existing file). A key file others can read is refused, as sshd
// refuses one.
func hostSigner(path string) (signer gossh.Signer, created bool, err error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		signer, err = newHostKey(path)
		return signer, err == nil, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("--ssh-host-key: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, false, fmt.Errorf("--ssh-host-key %s: permissions %04o are too open: others can read the private key (chmod 600 it)", path, perm)
	}
	data, err := readKeyFile(path, "--ssh-host-key", "a private key")
	if err != nil {
		return nil, false, err
	}
	signer, err = gossh.ParsePrivateKey(data)
	if err != nil {
		return nil, false, fmt.Errorf("--ssh-host-key %s: %w", path, err)
	}
	return signer, false, nil
}

// newHostKey makes an Ed25519 key and writes it to path in OpenSSH's
// format, readable by its owner only.
func newHostKey(path string) (gossh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("--ssh-host-key: make a key: %w", err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "latscope ssh dashboard")
	if err != nil {
		return nil, fmt.Errorf("--ssh-host-key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--ssh-host-key: write a new key: %w", err)
	}
	if _, err := f.Write(pem.EncodeToMemory(block)); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("--ssh-host-key: write a new key: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("--ssh-host-key: write a new key: %w", err)
	}
	return gossh.NewSignerFromKey(priv)
}

func readKeyFile(path, flag, what string) ([]byte, error) {
	return fileread.ReadFile(path, fileread.Limit{Flag: flag, Max: maxKeyFileBytes, What: what})
}
