//go:build linux

package conformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mariaDB is a throwaway MariaDB server (Debian's mariadb-server) with its
// data in a temporary directory. It listens on a Unix socket only; pods
// reach it through a forwarder in their network namespace, the harness
// through the socket.
type mariaDB struct {
	dir    string
	socket string
	cmd    *exec.Cmd
	done   chan struct{}
}

// startMariaDB starts the server; with pki it also offers TLS with pki's
// server certificate and trusts pki's CA for client certificates.
func startMariaDB(t testing.TB, dir string, pki *testPKI) *mariaDB {
	t.Helper()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var tlsFlags []string
	if pki != nil {
		for name, content := range map[string]string{"ca.pem": pki.caPEM, "server.pem": pki.serverCert, "server-key.pem": pki.serverKey} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tlsFlags = []string{"--ssl-ca=" + filepath.Join(dir, "ca.pem"), "--ssl-cert=" + filepath.Join(dir, "server.pem"), "--ssl-key=" + filepath.Join(dir, "server-key.pem")}
	}
	m := &mariaDB{dir: dir, socket: filepath.Join(dir, "mysqld.sock"), done: make(chan struct{})}
	install := exec.Command(lookSbin("mariadb-install-db"), "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=socket", "--skip-test-db", "--skip-name-resolve")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	logPath := filepath.Join(dir, "mariadbd.log")
	m.cmd = exec.Command(lookSbin("mariadbd"), "--no-defaults", "--datadir="+data, "--user=root",
		"--socket="+m.socket, "--skip-networking", "--pid-file="+filepath.Join(dir, "mariadbd.pid"),
		"--log-error="+logPath, "--skip-name-resolve", "--skip-log-bin",
		"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=0",
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci")
	m.cmd.Args = append(m.cmd.Args, tlsFlags...)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startProcess(m.cmd); err != nil {
		t.Fatalf("starting mariadbd: %v", err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(20 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := m.exec("SELECT 1"); err == nil {
			return m
		}
		select {
		case <-m.done:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("mariadbd exited:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("mariadbd did not accept connections within 30s:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dial connects to the server, for a pod's forwarder.
func (m *mariaDB) dial() (net.Conn, error) {
	return net.DialTimeout("unix", m.socket, 5*time.Second)
}

// exec runs SQL as root and returns the tab-separated rows, without headers.
func (m *mariaDB) exec(sql string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mariadb", "--no-defaults", "--socket="+m.socket, "-uroot", "--batch", "--skip-column-names", "-e", sql)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", sql, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// sqlString quotes s as an SQL string literal.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// createDatabase does what mariadb-operator's Database, User and Grant do in
// managed mode; requireX509 makes the user log in only over TLS with a
// client certificate the server trusts.
func (m *mariaDB) createDatabase(name, user, password string, requireX509 bool) error {
	require := ""
	if requireX509 {
		require = " REQUIRE X509"
	}
	_, err := m.exec(fmt.Sprintf(
		"CREATE DATABASE `%s` CHARACTER SET utf8mb4; "+
			"CREATE USER %s@'%%' IDENTIFIED BY %s%s; "+
			"GRANT ALL PRIVILEGES ON `%s`.* TO %s@'%%';",
		name, sqlString(user), sqlString(password), require, name, sqlString(user)))
	return err
}

// status returns a global status counter.
func (m *mariaDB) status(t testing.TB, name string) int {
	t.Helper()
	out, err := m.exec("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = " + sqlString(strings.ToUpper(name)))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("status %s: %q", name, out)
	}
	return n
}

// loginWithoutTLS tries to log in as user over the socket without TLS.
func (m *mariaDB) loginWithoutTLS(user, password string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mariadb", "--no-defaults", "--socket="+m.socket, "--skip-ssl", "-u"+user, "-e", "SELECT 1")
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+password)
	return cmd.Run()
}
