package work

// Labels and annotations on what the engine applies.
const (
	// LabelManagedBy marks every object the agent applied or created, with
	// the value ManagedBy.
	LabelManagedBy = "flotilla.io/managed-by"
	ManagedBy      = "flotilla-agent"
	// LabelWork names the Work an object belongs to. The engine touches
	// only objects that carry their Work's name here.
	LabelWork = "flotilla.io/work"
	// AnnotationBinding names the binding the Work renders.
	AnnotationBinding = "flotilla.io/binding"
	// LabelWorkRecord marks the ConfigMaps that record what a Work applied.
	LabelWorkRecord = "flotilla.io/work-record"
)

// FieldManager is the server-side apply field manager of the agent.
const FieldManager = "flotilla-agent"

// DefaultSystemNamespace holds the Work records unless configured otherwise.
const DefaultSystemNamespace = "flotilla-system"
