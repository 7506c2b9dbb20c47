"""The choices the parsers offer, written here so that building the parser imports no
TensorFlow: each is the constant of the module named beside it, which imports Keras.
tests/test_cli_light.py checks that each still equals that constant."""

STRATEGIES = ("default", "mirrored", "multiworker", "tpu")  # zoo.distribute.STRATEGIES
SCHEDULES = ("auto", "paper", "budget-linear", "budget-cosine")  # zoo.runs.budget.SCHEDULES
TOKENIZERS = ("sentencepiece", "wordpiece")  # zoo.text.tokenizers.TOKENIZERS
CHECKPOINTS = ("best", "last", "average")  # zoo.runs.rundir.CHECKPOINTS
QUANTIZE_MODES = ("int8",)  # zoo.export.int8.MODES
SAVED_MODEL = "savedmodel"  # zoo.export.SAVED_MODEL
FORMATS = ("litert", "onnx", "openvino")  # zoo.export.FORMATS, its keys
CTRANSLATE2 = "ctranslate2"  # zoo.export.CTRANSLATE2
TUNERS = ("random", "hyperband", "bayesian")  # zoo.tuning.TUNERS
IMAGE_CLASSES = 3  # zoo predict: the classes shown per image
