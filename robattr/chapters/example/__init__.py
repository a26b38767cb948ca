"""The example chapter: what only its notebooks use (see robattr.chapters).

``specs``            the zoo models each notebook trains, declared once (for ``robattr plan``
                     too)
``attack_tour``      every attack on one image and every training loss on one dataset
                     (attacks_and_defenses)
``maps``             every attribution method on one image, and the second-derivative check
                     (attribution_methods)
``ig_completeness``  Integrated Gradients' completeness error against its steps, per rule
                     (attribution_methods' exercise)
``noise``            Grad maps under uniform noise (digits_saliency)
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("specs", "attack_tour", "maps", "ig_completeness",
                                          "noise"))
