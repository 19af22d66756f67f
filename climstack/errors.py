"""The one error type our tools raise for bad input: what is wrong, where, and the fix."""


class ClimstackError(Exception):
    def __init__(self, message: str, fix: str = ""):
        self.message = message
        self.fix = fix
        super().__init__(f"{message}\n  fix: {fix}" if fix else message)
