package render

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// contentHashLength is the number of hex characters of ContentHash: 40 bits
// keep names short while a collision between two renders of one Glance stays
// negligible.
const contentHashLength = 10

// ContentHash is a short digest of a ConfigMap's or Secret's data, for the
// content-addressed object names: equal data, equal name.
func ContentHash(data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	// Length prefixes keep {"ab": "c"} and {"a": "bc"} apart.
	for _, k := range keys {
		writeLengthPrefixed(h, k)
		writeLengthPrefixed(h, data[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:contentHashLength]
}

func writeLengthPrefixed(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = h.Write(n[:])
	_, _ = h.Write([]byte(s))
}

// ConfigMapName is the name of the immutable config ConfigMap holding data.
func ConfigMapName(glanceName string, data map[string]string) string {
	return glanceName + "-config-" + ContentHash(data)
}

// BackendsSecretName is the name of the immutable backends Secret holding data.
func BackendsSecretName(glanceName string, data map[string]string) string {
	return glanceName + "-backends-" + ContentHash(data)
}

// DigestKeySecretName is the name of the Secret holding the key of the
// pod template's digests of the service-user password and the DSN.
func DigestKeySecretName(glanceName string) string {
	return glanceName + "-digest-key"
}

// DBConnectionSecretName is the name of the Secret holding the DSN.
func DBConnectionSecretName(glanceName string) string {
	return glanceName + "-db-connection"
}

// ImageCacheMaxSize is image_cache_max_size in bytes for an image cache of the
// given size: v1alpha1.ImageCacheMaxSizePercent of it, rounded down, so the
// pruner starts before the emptyDir bound is reached.
func ImageCacheMaxSize(size resource.Quantity) int64 {
	v := size.Value()
	if v <= 0 {
		return 0
	}
	// Split so that v*percent cannot overflow for any int64 size.
	return v/100*v1alpha1.ImageCacheMaxSizePercent + v%100*v1alpha1.ImageCacheMaxSizePercent/100
}
