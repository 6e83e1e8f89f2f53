package render

import (
	"net/url"
	"strings"
	"testing"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// pythonUnquote decodes like Python's urllib.parse.unquote, which SQLAlchemy
// applies to user and password: %XX sequences become bytes (read as UTF-8),
// '+' stays '+'. url.PathUnescape does the same for well-formed input.
func pythonUnquote(t *testing.T, s string) string {
	t.Helper()
	v, err := url.PathUnescape(s)
	if err != nil {
		t.Fatalf("unquote %q: %v", s, err)
	}
	return v
}

// splitDSN takes the URL apart at the delimiters SQLAlchemy's URL pattern
// uses: user up to ':', password up to the last '@' before the host.
func splitDSN(t *testing.T, dsn string) (user, password, hostport, db, query string) {
	t.Helper()
	rest, ok := strings.CutPrefix(dsn, "mysql+pymysql://")
	if !ok {
		t.Fatalf("scheme of %q", dsn)
	}
	userinfo, rest, ok := strings.Cut(rest, "@")
	if !ok || strings.Contains(rest, "@") {
		t.Fatalf("'@' in %q is not exactly the userinfo delimiter", dsn)
	}
	user, password, ok = strings.Cut(userinfo, ":")
	if !ok || strings.ContainsAny(user, ":/") || strings.Contains(password, "@") {
		t.Fatalf("userinfo %q", userinfo)
	}
	hostport, rest, _ = strings.Cut(rest, "/")
	db, query, _ = strings.Cut(rest, "?")
	return
}

func TestDSNEncodesCredentials(t *testing.T) {
	passwords := []string{
		"simple",
		"@:/?#%+ ",
		"p@ss:w/rd?x#y%z+ w",
		"ünïcødé-пароль-密码-🔑",
		"%41 is not A",
		"~._-AZaz09",
		"",
	}
	for _, pw := range passwords {
		dsn, err := DSN(minimalGlance(), "glance+user@x", pw)
		if err != nil {
			t.Fatal(err)
		}
		user, password, hostport, db, query := splitDSN(t, dsn)
		if got := pythonUnquote(t, user); got != "glance+user@x" {
			t.Errorf("user decodes to %q", got)
		}
		if got := pythonUnquote(t, password); got != pw {
			t.Errorf("password %q decodes to %q (dsn %s)", pw, got, dsn)
		}
		for i := 0; i < len(password); i++ {
			c := password[i]
			if !isUnreserved(c) && c != '%' {
				t.Errorf("password %q left %q unencoded", pw, c)
			}
		}
		if strings.ContainsAny(password, "abcdef") && strings.Contains(password, "%") {
			for _, seq := range strings.Split(password, "%")[1:] {
				if len(seq) >= 2 && strings.ToUpper(seq[:2]) != seq[:2] {
					t.Errorf("lowercase hex in %q", password)
				}
			}
		}
		if hostport != "mariadb.openstack.svc:3306" || db != "glance" || query != "charset=utf8" {
			t.Errorf("host %q db %q query %q", hostport, db, query)
		}
		// net/url agrees on the userinfo.
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := u.User.Password(); p != pw || u.User.Username() != "glance+user@x" {
			t.Errorf("net/url reads user %q password %q", u.User.Username(), p)
		}
	}
}

func TestDSNPercentEncodingIsUppercase(t *testing.T) {
	if got := percentEncode("ÿ+ /"); got != "%C3%BF%2B%20%2F" {
		t.Errorf("got %s", got)
	}
}

func TestDSNHostPortAndTLS(t *testing.T) {
	ca := &v1alpha1.SecretKeySelector{Name: "ca"}
	client := &v1alpha1.LocalObjectReference{Name: "client"}
	tests := []struct {
		name     string
		mutate   func(d *v1alpha1.DatabaseSpec)
		wantHost string
		wantQ    string
	}{
		{"managed", func(*v1alpha1.DatabaseSpec) {}, "mariadb.openstack.svc:3306", "charset=utf8"},
		{"brownfield with port", func(d *v1alpha1.DatabaseSpec) {
			d.ClusterRef, d.Host, d.Port = nil, "db.example.com", 3310
		}, "db.example.com:3310", "charset=utf8"},
		{"IPv4", func(d *v1alpha1.DatabaseSpec) { d.ClusterRef, d.Host = nil, "10.0.0.5" }, "10.0.0.5:3306", "charset=utf8"},
		{"IPv6 is bracketed", func(d *v1alpha1.DatabaseSpec) { d.ClusterRef, d.Host = nil, "fd00::5" }, "[fd00::5]:3306", "charset=utf8"},
		{"bracketed IPv6 stays", func(d *v1alpha1.DatabaseSpec) { d.ClusterRef, d.Host = nil, "[::1]" }, "[::1]:3306", "charset=utf8"},
		{"disabled", func(d *v1alpha1.DatabaseSpec) {
			d.TLS = &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSDisabled, CABundleSecretRef: ca, ClientCertSecretRef: client}
		}, "mariadb.openstack.svc:3306", "charset=utf8"},
		{"prefer behaves as require", func(d *v1alpha1.DatabaseSpec) {
			d.TLS = &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSPrefer}
		}, "mariadb.openstack.svc:3306", "charset=utf8&ssl_check_hostname=false"},
		{"require", func(d *v1alpha1.DatabaseSpec) {
			d.TLS = &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSRequire, CABundleSecretRef: ca}
		}, "mariadb.openstack.svc:3306", "charset=utf8&ssl_check_hostname=false"},
		{"require with client cert", func(d *v1alpha1.DatabaseSpec) {
			d.TLS = &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSRequire, ClientCertSecretRef: client}
		}, "mariadb.openstack.svc:3306", "charset=utf8&ssl_check_hostname=false&ssl_cert=/etc/glance/db-tls/client/tls.crt&ssl_key=/etc/glance/db-tls/client/tls.key"},
		{"verify-ca", func(d *v1alpha1.DatabaseSpec) {
			d.TLS = &v1alpha1.DatabaseTLSSpec{Mode: v1alpha1.DatabaseTLSVerifyCA, CABundleSecretRef: ca}
		}, "mariadb.openstack.svc:3306", "charset=utf8&ssl_ca=/etc/glance/db-tls/ca/ca.crt&ssl_check_hostname=false"},
		{"verify-full with custom CA key and client cert", func(d *v1alpha1.DatabaseSpec) {
			d.TLS = &v1alpha1.DatabaseTLSSpec{
				Mode:                v1alpha1.DatabaseTLSVerifyFull,
				CABundleSecretRef:   &v1alpha1.SecretKeySelector{Name: "ca", Key: "root.pem"},
				ClientCertSecretRef: client,
			}
		}, "mariadb.openstack.svc:3306", "charset=utf8&ssl_ca=/etc/glance/db-tls/ca/root.pem&ssl_check_hostname=true&ssl_cert=/etc/glance/db-tls/client/tls.crt&ssl_key=/etc/glance/db-tls/client/tls.key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			tt.mutate(&g.Spec.Database)
			dsn, err := DSN(g, "glance", "pw")
			if err != nil {
				t.Fatal(err)
			}
			_, _, hostport, db, query := splitDSN(t, dsn)
			if hostport != tt.wantHost || db != "glance" || query != tt.wantQ {
				t.Errorf("host %q db %q query %q\nwant host %q query %q", hostport, db, query, tt.wantHost, tt.wantQ)
			}
		})
	}
}

func TestDSNErrors(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(g *v1alpha1.Glance)
		user      string
		wantInErr string
	}{
		{"no host", func(g *v1alpha1.Glance) { g.Spec.Database.ClusterRef = nil }, "glance", "clusterRef or host"},
		{"host with delimiter", func(g *v1alpha1.Glance) {
			g.Spec.Database.ClusterRef, g.Spec.Database.Host = nil, "evil.com/x?y"
		}, "glance", "neither a host name"},
		{"host with userinfo", func(g *v1alpha1.Glance) {
			g.Spec.Database.ClusterRef, g.Spec.Database.Host = nil, "a@b"
		}, "glance", "neither a host name"},
		{"IPv6 zone", func(g *v1alpha1.Glance) {
			g.Spec.Database.ClusterRef, g.Spec.Database.Host = nil, "fe80::1%eth0"
		}, "glance", "zone"},
		{"managed without namespace", func(g *v1alpha1.Glance) { g.Namespace = "" }, "glance", "namespace"},
		{"empty user", func(*v1alpha1.Glance) {}, "", "username"},
		{"user not UTF-8", func(*v1alpha1.Glance) {}, "gl\xffance", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := minimalGlance()
			tt.mutate(g)
			_, err := DSN(g, tt.user, "secret-pw")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantInErr)
			}
			if strings.Contains(err.Error(), "secret-pw") {
				t.Errorf("error %q reveals the password", err)
			}
		})
	}
}

func TestDBTLSCAPath(t *testing.T) {
	if got := DBTLSCAPath(nil); got != "/etc/glance/db-tls/ca/ca.crt" {
		t.Errorf("default %q", got)
	}
	if got := DBTLSCAPath(&v1alpha1.DatabaseTLSSpec{CABundleSecretRef: &v1alpha1.SecretKeySelector{Name: "x", Key: "b.pem"}}); got != "/etc/glance/db-tls/ca/b.pem" {
		t.Errorf("custom key %q", got)
	}
}
