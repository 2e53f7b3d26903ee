package apitest

import (
	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/config"
)

// bucketOf is an Options.CostLimits bucket as the config holds it.
func bucketOf(b api.Bucket) config.Bucket {
	return config.Bucket{Rate: b.RatePerSecond, Burst: b.Burst}
}
