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
//
// Status: each manifest's health, a few key status fields of known kinds,
// and, for the first manifest (the workload), the values of the upsert's
// StatePaths (the JSONPath templates of the policy's statePreservation
// rules) on the object's status, of any kind. A template that does not
// evaluate has no value; it never fails an apply.
//
// Fencing: a Work whose upsert carries StopAfterSeconds is stopped when the
// hub has not answered for that long (the session reports answers with
// [Engine.Contact]): its Deployments, StatefulSets, ReplicaSets and
// ReplicationControllers are scaled to zero and its Jobs and CronJobs
// suspended, by server-side apply with their own field manager, and its
// record says it is fenced. Nothing but the hub's next upsert of the Work
// starts it again, not even a restart of the agent; the inventory reports
// fenced Works, and [Engine.FenceSignal] tells a session that one was
// fenced while it ran.
package work
