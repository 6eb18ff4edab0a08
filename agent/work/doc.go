// Package work applies the Works the hub sends to a member cluster and
// watches the health of what it applied.
//
// An [Engine] lives as long as the agent, across hub sessions: applies,
// retries, deletions and watches go on while the hub is unreachable. A
// session subscribes to the engine's results with [Engine.Subscribe],
// announces what the engine holds with [Engine.Inventory] and
// [Engine.Statuses], and hands the hub's WorkUpsert and WorkDelete messages
// to [Engine.Upsert] and [Engine.Delete].
//
// Objects are applied with server-side apply, labelled with the Work they
// belong to. The engine never touches an object that does not carry its
// Work's label: such a manifest fails instead. What each Work applied is
// recorded in a ConfigMap in the system namespace before the objects are
// created, so a restarted agent still knows what to prune and delete.
package work
