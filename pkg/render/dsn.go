package render

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

var hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$`)

// DatabaseHost is the address of the database server: the MariaDB cluster's
// Service in managed mode, spec.database.host otherwise.
func DatabaseHost(g *v1alpha1.Glance) (string, error) {
	d := g.Spec.Database
	switch {
	case d.ClusterRef != nil:
		if g.Namespace == "" {
			return "", fmt.Errorf("spec.database.clusterRef needs the Glance's namespace to address %s", d.ClusterRef.Name)
		}
		return d.ClusterRef.Name + "." + g.Namespace + ".svc", nil
	case d.Host != "":
		return d.Host, nil
	default:
		return "", fmt.Errorf("spec.database needs clusterRef or host")
	}
}

// DatabasePort is spec.database.port, defaulted.
func DatabasePort(g *v1alpha1.Glance) int32 {
	if g.Spec.Database.Port == 0 {
		return v1alpha1.DefaultDatabasePort
	}
	return g.Spec.Database.Port
}

// DBTLSCAPath is where the CA bundle of database.tls.caBundleSecretRef is
// mounted: its key (default ca.crt) inside DBTLSCADir.
func DBTLSCAPath(t *v1alpha1.DatabaseTLSSpec) string {
	key := v1alpha1.DefaultCABundleKey
	if t != nil && t.CABundleSecretRef != nil && t.CABundleSecretRef.Key != "" {
		key = t.CABundleSecretRef.Key
	}
	return DBTLSCADir + "/" + key
}

// DSN is the SQLAlchemy URL glance-api and glance-manage connect with,
// mysql+pymysql://USER:PASS@HOST:PORT/DB?charset=utf8 plus the TLS options.
//
// User and password are percent-encoded byte by byte outside RFC 3986's
// unreserved set, since SQLAlchemy decodes them with urllib.parse.unquote
// (so '+' stays '+' only when encoded, and '$' never reaches oslo.config's
// substitution of OS_DATABASE__CONNECTION).
//
// TLS uses only the query options SQLAlchemy folds into PyMySQL's ssl dict
// (ssl_ca, ssl_cert, ssl_key, ssl_check_hostname). ssl_verify_cert and
// ssl_verify_identity are deliberately not used: SQLAlchemy passes them to
// PyMySQL as strings next to that dict, and PyMySQL then rebuilds the dict
// from its own (empty) ssl_ca, dropping the CA and the client certificate
// and disabling the host name check — verify-full would silently trust any
// publicly signed certificate. With the ssl dict, PyMySQL verifies the server
// certificate exactly when a CA is given, and checks the host name when a CA
// is given and ssl_check_hostname is not false.
//
//   - disabled: no TLS.
//   - prefer, require: TLS without verification (ssl_check_hostname=false
//     alone turns TLS on). PyMySQL cannot fall back to plaintext, so prefer
//     behaves as require: a server without TLS is refused.
//   - verify-ca: ssl_ca, ssl_check_hostname=false.
//   - verify-full: ssl_ca, ssl_check_hostname=true.
//   - clientCertSecretRef adds ssl_cert and ssl_key in every TLS mode.
//
// verify-ca and verify-full need caBundleSecretRef: without a CA PyMySQL
// verifies nothing, so rendering them without one would be a silent
// downgrade.
func DSN(g *v1alpha1.Glance, username, password string) (string, error) {
	d := g.Spec.Database
	host, err := DatabaseHost(g)
	if err != nil {
		return "", err
	}
	host, err = urlHost(host)
	if err != nil {
		return "", err
	}
	// The port's range and the database name's pattern are the CRD's rules.
	port := DatabasePort(g)
	if username == "" {
		return "", fmt.Errorf("database username is empty")
	}
	// SQLAlchemy decodes the percent-encoding as UTF-8 and replaces what is
	// not, so such a credential could never authenticate.
	if !utf8.ValidString(username) || !utf8.ValidString(password) {
		return "", fmt.Errorf("database username or password is not valid UTF-8")
	}
	query := append([]string{"charset=utf8"}, dsnTLSQuery(d.TLS)...)
	return "mysql+pymysql://" + percentEncode(username) + ":" + percentEncode(password) + "@" +
		host + ":" + strconv.Itoa(int(port)) + "/" + d.Database + "?" + strings.Join(query, "&"), nil
}

// dsnTLSQuery is the TLS part of the DSN's query. The mode's values, and
// the CA the verifying modes need, are the CRD's rules.
func dsnTLSQuery(t *v1alpha1.DatabaseTLSSpec) []string {
	if t == nil || t.Mode == v1alpha1.DatabaseTLSDisabled {
		return nil
	}
	var q []string
	switch t.Mode {
	case v1alpha1.DatabaseTLSPrefer, v1alpha1.DatabaseTLSRequire:
		q = append(q, "ssl_check_hostname=false")
	case v1alpha1.DatabaseTLSVerifyCA, v1alpha1.DatabaseTLSVerifyFull:
		q = append(q, "ssl_ca="+percentEncodePath(DBTLSCAPath(t)))
		q = append(q, "ssl_check_hostname="+strconv.FormatBool(t.Mode == v1alpha1.DatabaseTLSVerifyFull))
	}
	if t.ClientCertSecretRef != nil {
		q = append(q, "ssl_cert="+DBTLSClientCertPath, "ssl_key="+DBTLSClientKeyPath)
	}
	return q
}

// urlHost checks a host name or IP address and writes it as a URL host,
// bracketing IPv6. Anything else could move the URL's delimiters.
func urlHost(host string) (string, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if a.Zone() != "" {
			return "", fmt.Errorf("database host %q: IPv6 zones are not supported", host)
		}
		if a.Is6() {
			return "[" + a.String() + "]", nil
		}
		return a.String(), nil
	}
	if len(host) > 253 || !hostnamePattern.MatchString(host) {
		return "", fmt.Errorf("database host %q is neither a host name nor an IP address", host)
	}
	return host, nil
}

// percentEncode encodes every byte outside RFC 3986's unreserved set
// (A-Z a-z 0-9 - . _ ~) as %XX with uppercase hex.
func percentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// percentEncodePath is percentEncode that leaves '/' readable, for the mount
// paths in the query.
func percentEncodePath(p string) string {
	parts := strings.Split(p, "/")
	for i := range parts {
		parts[i] = percentEncode(parts[i])
	}
	return strings.Join(parts, "/")
}

func isUnreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
