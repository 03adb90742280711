package changelog

// Partition returns the Kafka partition of a scope among n partitions. It
// is Kafka's default partitioner (murmur2 of the bytes, sign bit cleared,
// modulo n) applied to the scope, so any Kafka client that keys by scope
// agrees with it.
func Partition(scope string, n int32) int32 {
	return int32(murmur2([]byte(scope))&0x7fffffff) % n
}

// murmur2 is the 32-bit MurmurHash2 variant with Kafka's seed.
func murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		b = b[4:]
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
