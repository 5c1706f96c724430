package provider

import (
	"fmt"
	"time"
)

// VersionSkewDefault is how far ahead of the clock a version that is a
// time may lie unless the endpoint sets version_skew.
const VersionSkewDefault = 24 * time.Hour

// MaxPlainVersion bounds versions that are not times: 2^53, the largest
// integer every JSON reader keeps exact (RFC 7493, section 2.2). No
// sender can be relied on to mean a larger one.
const MaxPlainVersion = int64(1) << 53

// CheckTimeVersion refuses, with ErrVersionFromFuture, a version that is
// a time in milliseconds lying further ahead of now than the endpoint's
// version_skew. A projection only moves to greater versions: one version
// far ahead of the clock would make every real update after it stale.
func CheckTimeVersion(ep *Endpoint, version int64, now time.Time) error {
	skew := ep.VersionSkew
	if skew <= 0 {
		skew = VersionSkewDefault
	}
	if version > now.Add(skew).UnixMilli() {
		return fmt.Errorf("%w: version %d is %s ahead of the receiver's clock (version_skew %s)",
			ErrVersionFromFuture, version, time.UnixMilli(version).Sub(now).Round(time.Second), skew)
	}
	return nil
}

// CheckPlainVersion refuses, with ErrVersionFromFuture, a version that is
// not a time but lies above MaxPlainVersion: like a time far ahead, it
// would make every real update after it stale.
func CheckPlainVersion(version int64) error {
	if version > MaxPlainVersion {
		return fmt.Errorf("%w: version %d is above 2^53, beyond any version a sender can mean", ErrVersionFromFuture, version)
	}
	return nil
}
