package activities

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
)

// A worker keeps the data of the campaigns it is sending, parsed, so a batch
// reads it from memory: campaignDataCacheSize campaigns of at most
// contract.MaxCampaignDataBytes each (a few MiB at most), for
// campaignDataCacheTTL after they were read. A campaign's data never changes
// once it is stored, so a cached copy is never stale.
const (
	campaignDataCacheSize = 64
	campaignDataCacheTTL  = 10 * time.Minute
)

// campaignDataCache is the worker's cache of campaigns' data, made on first use.
type campaignDataCache struct {
	once  sync.Once
	cache *expirable.LRU[string, templates.Data]
}

func (c *campaignDataCache) get() *expirable.LRU[string, templates.Data] {
	c.once.Do(func() {
		c.cache = expirable.NewLRU[string, templates.Data](campaignDataCacheSize, nil, campaignDataCacheTTL)
	})
	return c.cache
}

// campaignData is the campaign's data as stored with it (campaigns.data): the
// campaign's workflow and its batches carry only the campaign's id, so the data
// is in no batch's input or history however many batches there are. Batches
// only read it, never change it (recipientData clones before merging).
func (a *Activities) campaignData(ctx context.Context, tenantID, campaignID string) (templates.Data, error) {
	key := tenantID + "\x00" + campaignID
	cache := a.campaignDataCache.get()
	if d, ok := cache.Get(key); ok {
		return d, nil
	}
	cp, err := a.Store.GetCampaign(ctx, tenantID, campaignID)
	if errors.Is(err, herald.ErrNotFound) {
		return nil, contract.RenderFailed.New("campaign "+campaignID+" is gone", err)
	}
	if err != nil {
		return nil, err
	}
	d := templates.Data{}
	if len(cp.Data) > 0 {
		if err := json.Unmarshal(cp.Data, &d); err != nil {
			return nil, contract.RenderFailed.New("campaign "+campaignID+" data does not decode", err)
		}
	}
	cache.Add(key, d)
	return d, nil
}
