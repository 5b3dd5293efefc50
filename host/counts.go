package host

import "context"

// TenantCounts is what one tenant has, by status: what the console's
// pages count.
type TenantCounts struct {
	// Tasks counts the tenant's tasks in each status (a status with none
	// is absent).
	Tasks map[TaskStatus]int `json:"tasks"`
	// Attempts counts the tenant's recorded attempts.
	Attempts int `json:"attempts"`
	// Messages counts the tenant's accepted messages.
	Messages int `json:"messages"`
	// Deliveries counts the deliveries of the tenant's messages in each
	// status (queued, dead; a status with none is absent).
	Deliveries map[DeliveryStatus]int `json:"deliveries"`
}

// TenantCounter is a store that counts one tenant's rows by status in one
// read (both stores run storecore.TenantCountsQuery).
type TenantCounter interface {
	// TenantCounts counts tenant's rows ("" is DefaultTenant).
	TenantCounts(ctx context.Context, tenant string) (*TenantCounts, error)
}
